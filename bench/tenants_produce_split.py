"""A Produce decision at 10 and 10^6 tenants, split: the byte-rate call and the producer-id call timed apart.

The same managers, tenants and paced clock as ``bench/tenants.py`` (its ``build``, ``populate``, ``tenant`` and
``Pace``); per size, 4 rounds of 40,000 random tenants, the first not counted. Says which of the two calls the
Produce decision's growth at 10^6 tenants comes from. Usage: ``python bench/tenants_produce_split.py``.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.tenants import Pace, build, percentile, populate, tenant  # noqa: E402
from quota.clock import ManualClock  # noqa: E402


def costs(quotas, clock, tenants: int, users: int, samples: int, seed: int) -> dict[str, list[int]]:
    produce, pids = quotas.produce, quotas.producer_ids
    pace = Pace(clock, 20.0)
    rng = random.Random(seed)
    picks = [tenant(rng.randrange(tenants), users) for _ in range(samples)]
    found: dict[str, list[int]] = {"byte rate": [], "producer id": []}
    timer = time.perf_counter_ns
    gc.disable()
    try:
        for user, client_id, pid in picks:
            now = pace.next()
            began = timer()
            produce.record_and_decide(user, client_id, 1_000, now)
            found["byte rate"].append(timer() - began)
            began = timer()
            pids.record_and_decide(user, pid, now)
            found["producer id"].append(timer() - began)
    finally:
        gc.enable()
    return found


def main() -> None:
    sizes = {"10 tenants": (10, 10), "1,000,000 tenants": (1_000_000, 100_000)}
    built = {}
    for label, (tenants, users) in sizes.items():
        clock = ManualClock(1_000_000)
        quotas = build(clock)
        populate(quotas, clock, tenants, users, 20.0)
        built[label] = (quotas, clock)
    results: dict[str, dict[str, list[int]]] = {label: {} for label in sizes}
    for round_ in range(4):
        for label, (tenants, users) in sizes.items():
            for kind, values in costs(*built[label], tenants, users, 40_000, round_).items():
                if round_:
                    results[label].setdefault(kind, []).extend(values)
    small, big = results.values()
    for kind in small:
        a = [percentile(small[kind], p) / 1000 for p in (0.5, 0.99)]
        b = [percentile(big[kind], p) / 1000 for p in (0.5, 0.99)]
        print(f"produce, {kind} call: 10 tenants p50 {a[0]:.2f} us, p99 {a[1]:.2f} us; 10^6 tenants p50 {b[0]:.2f} us,"
              f" p99 {b[1]:.2f} us; p50 {b[0] / a[0]:.2f} x ({b[0] - a[0]:+.2f} us)")


if __name__ == "__main__":
    main()
