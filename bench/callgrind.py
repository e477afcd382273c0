"""Counting instructions with callgrind around the measured part of a benchmark only.

A benchmark run under ``valgrind --tool=callgrind --instr-atstart=no`` counts nothing until it calls
:func:`instrument` ``("on")`` and stops counting at ``("off")``: its imports and the set-up of its inputs (frames built
per pair, say) stay out of the figure. :func:`total` reads what callgrind counted.

Run as a script, ``python bench/callgrind.py OUT -m MODULE [ARGS...]`` replaces itself with that module run by the same
interpreter under callgrind, counting nothing until told (another process switches it on and off with
:func:`instrument` and its pid), the counts written to OUT when it exits: how bench/request_profile.py's
``--instructions`` runs the proxy as a process of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def instrument(state: str, pid: int | None = None) -> None:
    """Under callgrind started with ``--instr-atstart=no``: count instructions from now on (``on``) or no longer
    (``off``), in this process or in the process ``pid``."""
    target = str(os.getpid() if pid is None else pid)
    subprocess.run(
        ["callgrind_control", "-i", state, target], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def total(out_file: str) -> int:
    """The instructions callgrind counted in the run that wrote ``out_file`` (its largest total line)."""
    with open(out_file) as f:
        found = [int(n) for n in re.findall(r"^(?:summary|totals): (\d+)", f.read(), re.M)]
    if not found:
        raise RuntimeError(f"no instruction total in {out_file}")
    return max(found)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit(__doc__)
    out = sys.argv[1]
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    os.execvp("valgrind", [*valgrind, sys.executable, *sys.argv[2:]])
