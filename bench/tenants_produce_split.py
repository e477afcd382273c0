"""A Produce decision at 10 and 10^6 tenants, split: the byte-rate call and the producer-id call timed apart.

The same managers, tenants and paced clock as ``bench/tenants.py`` (its ``build``, ``populate``, ``tenant`` and
``Pace``); per size, 4 rounds of 40,000 random tenants, the first not counted. Says which of the two calls the
Produce decision's growth at 10^6 tenants comes from.

Beside them, the Fetch byte-rate call (``fetch.record_and_decide``, the same manager class) on the same tenant, and
each round run twice: Produce's calls first, then the Fetch call ("produce first", the order of ``bench/tenants.py``)
and the Fetch call first ("fetch first"). Whichever byte-rate call comes first pays for what a tenant's two sensors
share: their name strings (both made from the same strings) and the pages and cache lines of objects allocated side
by side when the tenant was made. Usage: ``python bench/tenants_produce_split.py``.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.tenants import Pace, build, percentile, populate, tenant  # noqa: E402
from quota.primitives.clock import ManualClock  # noqa: E402


def costs(
    quotas, clock, tenants: int, users: int, samples: int, seed: int, fetch_first: bool = False
) -> dict[str, list[int]]:
    produce, pids, fetch = quotas.produce, quotas.producer_ids, quotas.fetch
    pace = Pace(clock, 20.0)
    rng = random.Random(seed)
    picks = [tenant(rng.randrange(tenants), users) for _ in range(samples)]
    order = "fetch first" if fetch_first else "produce first"
    found: dict[str, list[int]] = {"byte rate": [], "producer id": [], "fetch byte rate": []}
    timer = time.perf_counter_ns
    gc.disable()
    try:
        for user, client_id, pid in picks:
            now = pace.next()
            if fetch_first:
                began = timer()
                fetch.record_and_decide(user, client_id, 2_000, now)
                found["fetch byte rate"].append(timer() - began)
            began = timer()
            produce.record_and_decide(user, client_id, 1_000, now)
            found["byte rate"].append(timer() - began)
            began = timer()
            pids.record_and_decide(user, pid, now)
            found["producer id"].append(timer() - began)
            if not fetch_first:
                began = timer()
                fetch.record_and_decide(user, client_id, 2_000, now)
                found["fetch byte rate"].append(timer() - began)
    finally:
        gc.enable()
    return {f"{kind}, {order}": values for kind, values in found.items()}


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
        for fetch_first in (False, True):
            for label, (tenants, users) in sizes.items():
                for kind, values in costs(
                    *built[label], tenants, users, 40_000, 2 * round_ + fetch_first, fetch_first
                ).items():
                    if round_:
                        results[label].setdefault(kind, []).extend(values)
    small, big = results.values()
    for kind in small:
        a = [percentile(small[kind], p) / 1000 for p in (0.5, 0.99)]
        b = [percentile(big[kind], p) / 1000 for p in (0.5, 0.99)]
        name = kind.replace(",", " call,", 1)
        name = name if name.startswith("fetch") else "produce, " + name
        print(
            f"{name}: 10 tenants p50 {a[0]:.2f} us, p99 {a[1]:.2f} us; 10^6 tenants p50 {b[0]:.2f} us,"
            f" p99 {b[1]:.2f} us; p50 {b[0] / a[0]:.2f} x ({b[0] - a[0]:+.2f} us)"
        )


if __name__ == "__main__":
    main()
