"""The producer-id quota's cache (KIP-936): memory per user, cost per PID, and the measured false-positive rate.

Two loads, as the issue asks: 1,000,000 distinct PIDs for one user, and 10,000 users x 100 PIDs, fed through
:class:`quota.managers.producer_ids.ProducerIdQuotaManager` with the default settings (bloom filters sized for 1,000 PIDs
per half window at 0.001) and a second sizing where one user's filter is sized for its load. The false-positive
rate is measured on PIDs never added, right after a filter was filled to its expected size. Then the Python cost
of planning a Produce request (header already parsed) with and without a ``producer_ids_rate`` configured.
Usage: ``python bench/producer_ids.py``.
"""

from __future__ import annotations

import os
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from quota.managers.producer_id_cache import BloomFilter  # noqa: E402
from quota.managers.producer_ids import ProducerIdQuotaManager  # noqa: E402
from quota.primitives.quota_table import QuotaTable  # noqa: E402

TABLE = QuotaTable.from_values([({"user": "<default>"}, {"producer_ids_rate": 1e12})])  # counted, never throttled


def _fill(manager: ProducerIdQuotaManager, users: int, pids: int) -> None:
    pid = 0
    for u in range(users):
        user = f"user-{u}"
        for _ in range(pids):
            manager.record_and_decide(user, pid, 0)
            pid += 1


def feed(make, users: int, pids: int) -> tuple[float, int]:
    """Seconds per PID (timed alone) and bytes held (traced in a second run), for ``users`` x ``pids`` distinct
    PIDs at one instant."""
    start = time.perf_counter()
    _fill(make(), users, pids)
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    manager = make()
    _fill(manager, users, pids)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return elapsed / (users * pids), held


def false_positive_rate(expected: int, rate: float, probes: int = 200_000) -> float:
    f = BloomFilter(expected, rate)
    for pid in range(expected):
        f.add(pid)
    return sum(pid in f for pid in range(10**9, 10**9 + probes)) / probes


def plan_cost(with_quota: bool, n: int = 200_000) -> float:
    from config.loader import parse_config
    from proxy.apis import ConnectionScope, Session, plan_request
    from proxy.cluster.topics import Topics
    from proxy.codec.header import RequestHeader
    from proxy.enforcement.proxy_quotas import ProxyQuotas

    quotas = [{"entity": {"user": "<default>"}, "producer_ids_rate": 1e12}] if with_quota else []
    config = parse_config(
        {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}], "quotas": quotas}
    )
    scope = ConnectionScope(None, Topics(), ProxyQuotas(config).home)
    session = Session("L", "127.0.0.1")
    header = RequestHeader(16384, 0, 9, 1, "p", 20, 1, (4242,))
    start = time.perf_counter()
    for _ in range(n):
        plan_request(scope, session, header)
    return (time.perf_counter() - start) / n


def main() -> None:
    print("KIP-936 producer-id cache, default sizing (1,000 PIDs per filter at 0.001):")
    for users, pids in ((1, 1_000_000), (10_000, 100)):
        per_pid, held = feed(lambda: ProducerIdQuotaManager(TABLE), users, pids)
        print(
            f"  {users:>6} users x {pids:>9} PIDs: {per_pid * 1e6:6.2f} us per PID, {held / users:12,.0f} bytes "
            f"per user, {held / 2**20:8.1f} MiB in all"
        )
    per_pid, held = feed(lambda: ProducerIdQuotaManager(TABLE, expected_pids=1_000_000), 1, 1_000_000)
    print(f"  one user, filter sized for 1,000,000 PIDs: {per_pid * 1e6:.2f} us per PID, {held / 2**20:.1f} MiB")
    print("false-positive rate, filled to its expected size:")
    for expected, rate in ((1_000, 0.001), (1_000, 0.01), (100_000, 0.001), (1_000_000, 0.001)):
        measured = false_positive_rate(expected, rate)
        print(f"  {expected:>9} expected at {rate:<6}: measured {measured:.5f} ({measured / rate:.2f} x configured)")
    without, with_ = plan_cost(False), plan_cost(True)
    print(
        f"planning a Produce (header parsed): {without * 1e6:.2f} us without producer_ids_rate, "
        f"{with_ * 1e6:.2f} us with it (a known PID)"
    )


if __name__ == "__main__":
    main()
