"""What one byte-rate record costs in this tree against an older revision, both in one process, timed alternately.

The old ``quota/managers/client_quota.py`` (and ``sensor.py``) is read from git (``--old``) and loaded beside the
current one as ``bench/byte_rate_differential.py`` does. Each round times, on both managers in turn (the order
alternating), ``record_and_decide`` of every known tenant once and then a peer's record of them
(``record_remote_rows``); the clock moves 1 ms a round. Two quota shapes: ``/users/<default>/clients/<default>``
(``pair``) and ``/clients/<default>`` (``client``). Prints the median ns per call of each and new / old.

Usage: ``python bench/record_cost.py [--old REV] [--tenants 1000] [--rounds 400]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.byte_rate_differential import OldTable, load_old  # noqa: E402
from quota.managers import client_quota as new_module  # noqa: E402
from quota.primitives.clock import ManualClock  # noqa: E402
from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE  # noqa: E402
from quota.primitives.quota_table import QuotaTable  # noqa: E402

P = PRODUCER_BYTE_RATE
SHAPES = {"pair": {"user": DEFAULT, "client-id": DEFAULT}, "client": {"client-id": DEFAULT}}


def timed(old_module, shape: str, n: int, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """ns per record and per remote row of each tree, one value a round."""
    table = QuotaTable.from_values([(SHAPES[shape], {P: 10**9})])
    tenants = [(f"user-{i % 1000}" if shape == "pair" else "", f"client-{i}") for i in range(n)]
    users, client_ids, values = [u for u, _ in tenants], [c for _, c in tenants], [100] * n
    managers = {}
    for name, module, quotas in (("old", old_module, OldTable(table)), ("new", new_module, table)):
        clock = ManualClock()
        manager = module.ClientQuotaManager(quotas, P, clock)
        for user, client_id in tenants:  # every tenant known before timing
            manager.record_and_decide(user, client_id, 100)
        managers[name] = manager, clock
    out: dict[str, tuple[list[float], list[float]]] = {"old": ([], []), "new": ([], [])}
    gc.disable()  # a collection inside a timed loop is the collector's cost
    try:
        for r in range(rounds):
            for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                manager, clock = managers[name]
                clock.advance(1)
                record = manager.record_and_decide
                t0 = time.perf_counter_ns()
                for user, client_id in tenants:
                    record(user, client_id, 100)
                t1 = time.perf_counter_ns()
                manager.record_remote_rows(users, client_ids, values, clock.now_ms())
                t2 = time.perf_counter_ns()
                out[name][0].append((t1 - t0) / n)
                out[name][1].append((t2 - t1) / n)
    finally:
        gc.enable()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--old", default="46024d1", help="the revision to compare against (default: before the sensor keeper)"
    )
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args()
    old_module = load_old(args.old)
    print(
        f"{args.tenants} known tenants, {args.rounds} rounds alternating, against {args.old}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    for shape in SHAPES:
        out = timed(old_module, shape, args.tenants, args.rounds)
        (old_rec, old_row), (new_rec, new_row) = (
            (statistics.median(a), statistics.median(b)) for a, b in (out["old"], out["new"])
        )
        print(
            f"  {shape:6} record_and_decide old {old_rec:5.0f} new {new_rec:5.0f} ns ({new_rec / old_rec:.3f} x); "
            f"remote row old {old_row:4.0f} new {new_row:4.0f} ns ({new_row / old_row:.3f} x)"
        )
    print(f"  load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
