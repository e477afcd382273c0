"""Reads the timeline `make test` wrote with ``KQP_TEST_TIMELINE=FILE`` (tests/timeline.py) and prints where the
suite's time went: the run's span, each xdist group's span and its tests' summed time and CPU (the longest group is
the critical path the other workers cannot shorten), the ten dearest tests by CPU, and the machine's idle share in
each tenth of the run (near 0 throughout: the suite waits for the cores; large while a group still runs: it waits
for that group).

    KQP_TEST_TIMELINE=/tmp/timeline.jsonl make test
    python tools/suite_timeline.py /tmp/timeline.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    lines = [json.loads(line) for line in open(path) if line.strip()]
    t0, t1 = min(x["start"] for x in lines), max(x["end"] for x in lines)
    print(f"{len(lines)} tests, {t1 - t0:.0f} s from the first test's start to the last one's end")
    groups: dict[str, list[dict]] = defaultdict(list)
    for x in lines:
        groups[x["group"] or f"(no group) {x['worker']}"].append(x)
    print(f"\n{'group':32} {'from':>6} {'to':>6} {'tests s':>8} {'cpu s':>7}  tests")
    for name, xs in sorted(groups.items(), key=lambda kv: -max(x["end"] for x in kv[1])):
        start, end = min(x["start"] for x in xs) - t0, max(x["end"] for x in xs) - t0
        spent, cpu = sum(x["end"] - x["start"] for x in xs), sum(x["cpu"] for x in xs)
        print(f"{name[:32]:32} {start:6.0f} {end:6.0f} {spent:8.0f} {cpu:7.0f}  {len(xs)}")
    print("\nthe dearest tests by CPU of their worker (its threads and waited-for children):")
    for x in sorted(lines, key=lambda x: -x["cpu"])[:10]:
        print(f"  {x['cpu']:6.1f} cpu s {x['end'] - x['start']:6.1f} s  {x['test']}")
    print("\nthe machine's idle share, per tenth of the run (from the tests' own spans):")
    step = (t1 - t0) / 10
    for i in range(10):
        lo, hi = t0 + i * step, t0 + (i + 1) * step
        inside = [x for x in lines if lo <= (x["start"] + x["end"]) / 2 < hi and x["busy"] + x["idle"] > 0]
        busy, idle = sum(x["busy"] for x in inside), sum(x["idle"] for x in inside)
        share = idle / (busy + idle) if busy + idle else float("nan")
        print(f"  {lo - t0:5.0f}-{hi - t0:5.0f} s: idle {share:5.1%} ({len(inside)} tests)")


if __name__ == "__main__":
    main(sys.argv[1])
