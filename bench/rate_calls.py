"""Instructions one call of a sampled rate's method costs (callgrind: load moves time, not instructions), in this tree
or another (``--tree DIR``): the rate's C twin against its pure Python, or one revision against another.

Each run is ``valgrind --tool=callgrind python bench/rate_calls.py --inner OP N`` for two values of N, after one
plain run that compiles the bytecode (a first run pays for it); the difference over the difference of N is what a
call costs. The rate has Kafka's default window (11 samples and one more), recorded into for 12 s. ``OP``:
``record_within``, ``peek``, ``samples``, ``total``, ``seed`` (``at_limit``'s samples into a new rate: a sensor made
in a full table, a new IP's rate in a full table) or ``flood`` (a record of a new client id into a full
``SensorKeeper`` of 100: an eviction and a seed each). ``KAFKA_QUOTA_PROXY_PURE_PYTHON=1`` measures the pure class.

Usage: ``python bench/rate_calls.py [--tree DIR] [--op peek ...] [--calls 200 5200]``. Another revision is a plain
export with its extensions built: ``git archive REV | tar -x -C DIR && cd DIR && python setup.py build_ext
--inplace``. Needs valgrind (Debian: ``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

OPS = ("record_within", "peek", "samples", "total", "seed", "flood")
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inner(op: str, n: int) -> None:
    """N calls of ``op``, in the tree on ``sys.path`` (run under callgrind by :func:`instructions`)."""
    from quota.primitives.rate import QuotaWindow, Rate, at_limit

    rate, now = Rate(), 22_000
    for i in range(40):
        rate.record(1000.0, 10_000 + i * 300)
    seeded = at_limit(1e6, QuotaWindow(), now)
    calls = {
        "record_within": lambda: rate.record_within(10.0, now, 1e9),
        "peek": lambda: rate.peek(now),
        "samples": lambda: rate.samples(now),
        "total": lambda: rate.total(now),
        "seed": lambda: Rate().seed(seeded, now),
    }
    if op != "flood":
        call = calls[op]
        for _ in range(n):
            call()
        return
    from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE
    from quota.primitives.quota_table import QuotaTable
    from quota.primitives.sensor import ClientSensors
    from quota.primitives.sensor_keeper import SensorKeeper

    table = QuotaTable.from_values([({"client-id": DEFAULT}, {PRODUCER_BYTE_RATE: 1e6})])
    keeper = SensorKeeper(table, PRODUCER_BYTE_RATE, QuotaWindow(), ClientSensors, 3_600_000, 100)
    for i in range(300):  # full: each record from here on evicts one
        keeper.for_record("", f"warm-{i}", 10_000 + i).record_within(100, 10_000 + i)
    for i in range(n):
        keeper.for_record("", f"new-{i}", 20_000 + i).record_within(100, 20_000 + i)


def instructions(tree: str, op: str, n: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": tree}
    command = [sys.executable, os.path.abspath(__file__), "--inner", op, str(n)]
    subprocess.run(command, env=env, check=True, cwd=tree)  # the bytecode compiled, outside the count
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.out", *command],
            env=env,
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
        )
    return int(re.findall(r"Collected : (\d+)", done.stderr)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=HERE, help="the source tree measured (its extensions built in place)")
    parser.add_argument("--op", nargs="+", choices=OPS, default=list(OPS))
    parser.add_argument("--calls", nargs=2, type=int, default=[200, 5200])
    parser.add_argument("--inner", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner[0], int(args.inner[1]))
        return
    tree = os.path.abspath(args.tree)
    small, large = args.calls
    for op in args.op:
        per_call = (instructions(tree, op, large) - instructions(tree, op, small)) / (large - small)
        print(f"{op}: {per_call:,.0f} instructions a call ({tree})")


if __name__ == "__main__":
    main()
