from demo.run import main

main()
