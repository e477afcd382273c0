"""Instructions per request/response pair on the connection's pure path, counted by callgrind: the figure of
bench/pipeline_cost.py that the machine's load does not move.

Runs ``valgrind --tool=callgrind python bench/pipeline_cost.py --pairs N`` for two values of N, counting only while
the pairs go through the core (the interpreter's start-up and the frames built for the pairs, about 17,900
instructions per Produce pair, stay out: figures before 2026-11-30's correction in bench/RESULTS.md include them),
and prints the difference of the two runs' totals divided by the difference of their pairs, so what is counted
once per run (the first call's caches) cancels out. ``--api``, ``--version``, ``--quotas`` and ``--request-rate`` are
pipeline_cost.py's (which pair, issue 46's quotas, a request_rate never binding). Needs valgrind (Debian: ``apt
install valgrind``). Usage: ``python bench/pipeline_instructions.py [--pairs 2000 12000] [--api produce] [--quotas]
[--request-rate]`` (about 4 minutes per pair of runs: callgrind runs about 50 x slower).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.callgrind import total  # noqa: E402


def instructions(pairs: int, directory: Path, options: list[str]) -> int:
    """The total instructions callgrind counted for one run of pipeline_cost.py with ``pairs`` pairs."""
    out = directory / f"callgrind.{pairs}"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            str(ROOT / "bench" / "pipeline_cost.py"),
            "--pairs",
            str(pairs),
            *options,
            "--toggle",
        ],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    return total(str(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, nargs=2, default=[2000, 12000], metavar=("FEW", "MANY"))
    parser.add_argument("--api", default="list-offsets", help="pipeline_cost.py's pair")
    parser.add_argument("--version", type=int, help="its API version (pipeline_cost.py's default)")
    parser.add_argument("--quotas", action="store_true", help="issue 46's quotas, never binding, in cluster mode")
    parser.add_argument("--request-rate", action="store_true", help="a request_rate for every user, never binding")
    parser.add_argument("--topic-quota", action="store_true", help="a {topic: <default>} byte rate, never binding")
    parser.add_argument("--partition-quota", action="store_true", help="a partition byte rate too, never binding")
    args = parser.parse_args()
    few, many = args.pairs
    options = ["--api", args.api, *([] if args.version is None else ["--version", str(args.version)])]
    options += ["--quotas"] if args.quotas else []
    options += ["--request-rate"] if args.request_rate else []
    options += ["--topic-quota"] if args.topic_quota else []
    options += ["--partition-quota"] if args.partition_quota else []
    if shutil.which("valgrind") is None:
        print("pipeline_instructions: valgrind not found (Debian: apt install valgrind)", file=sys.stderr)
        return 2
    if many <= few:
        parser.error("the second count of pairs must be the larger")
    with tempfile.TemporaryDirectory(prefix="callgrind-") as work:
        low, high = instructions(few, Path(work), options), instructions(many, Path(work), options)
    per_pair = (high - low) / (many - few)
    print(
        f"{per_pair:,.0f} instructions per request + response ({' '.join(options)}; "
        f"{low:,} for {few} pairs, {high:,} for {many})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
