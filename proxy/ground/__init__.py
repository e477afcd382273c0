"""Ground utilities every part of the proxy stands on: tasks, clocks, bounded logging, and pausing the garbage
collector around work off the loop. They import nothing else of the proxy."""
