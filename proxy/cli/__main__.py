"""``python -m proxy.cli``: the same command line as ``kafka-quota-proxy``."""

from proxy.cli.main import main

raise SystemExit(main())
