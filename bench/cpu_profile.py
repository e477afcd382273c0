"""Run a module under cProfile timed by the thread's CPU time, not the wall clock: on a loaded machine a wall-clock
profile charges the time the process waited for a core to whatever it was doing then (a socket write that woke the
peer looks like a millisecond), which says nothing of what the code costs.

Usage: ``python bench/cpu_profile.py OUT -m MODULE [ARGS...]`` (bench/request_profile.py's ``--profile`` runs the proxy
so); the profile is written to OUT when the module returns or raises (the proxy on SIGTERM), for ``python -m pstats
OUT``. Only the main thread is profiled.
"""

from __future__ import annotations

import cProfile
import runpy
import sys
import time
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit(__doc__)
    out, module = sys.argv[1], sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, as ``python -m`` from it would have
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
