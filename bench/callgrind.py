"""Counting instructions with callgrind around the measured part of a benchmark only.

A benchmark run under ``valgrind --tool=callgrind --instr-atstart=no`` counts nothing until it calls
:func:`instrument` ``("on")`` and stops counting at ``("off")``: its imports and the set-up of its inputs (frames built
per pair, say) stay out of the figure. :func:`total` reads what callgrind counted."""

from __future__ import annotations

import os
import re
import subprocess


def instrument(state: str) -> None:
    """Under callgrind started with ``--instr-atstart=no``: count instructions from now on (``on``) or no longer
    (``off``)."""
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def total(out_file: str) -> int:
    """The instructions callgrind counted in the run that wrote ``out_file`` (its largest total line)."""
    with open(out_file) as f:
        found = [int(n) for n in re.findall(r"^(?:summary|totals): (\d+)", f.read(), re.M)]
    if not found:
        raise RuntimeError(f"no instruction total in {out_file}")
    return max(found)
