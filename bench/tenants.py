"""A million tenants: memory per tenant, decision cost, and idle expiry, on the quota managers a proxy holds.

Pure (no sockets; a manual clock): a :class:`proxy.enforcement.proxy_quotas.ProxyQuotas` built from one configuration
with ``<default>`` quotas (``/users/<default>/clients/<default>`` producer_byte_rate and consumer_byte_rate,
``/users/<default>`` producer_ids_rate), then ``--tenants`` client ids spread over ``--users`` users each make one
produce, one fetch and one new producer id, as their first requests would. Printed, each against its target:

* memory per tenant: the process's resident set size grown by the tenants, divided by their number (the first
  10 tenants' share is negligible);
* decision cost: p50 and p99 of the calls the request path makes for one Produce (``produce.record_and_decide``,
  ``producer_ids.record_and_decide`` for a known id) and one Fetch (``fetch.remaining_in_quota_window``,
  ``fetch.record_and_decide``), each timed alone, on tenants drawn at random from all of them, against the same
  with 10 tenants (target: within 1.2 x). The manual clock moves as a busy proxy's would: ``--pace-us`` per tenant
  visited (a Produce and a Fetch; 20 us is 100,000 requests/s, about one proxy process's ceiling), while the tenants
  are made and while they are timed, so at 10^6 tenants a tenant comes back seconds later (its next record starts a
  new sample, and its sensor may move in the table) and at 10 every fraction of a millisecond, as in a proxy. Until
  2026-11-25 the clock moved 1 ms per 1,000 visits after making every tenant at one instant (``--pace-us 1``),
  which kept every one of 10^6 tenants in the sample it was made in. One round per size is run first and not
  counted (warm-up). Beside them, the floor: one lookup in the produce manager's table of sensors and one field of
  the sensor found (``floor``), timed the same way on another random tenant: what touching one tenant's entry
  costs at each size, before any quota work;
* idle expiry: the clock moved past the hour, then the housekeeping's ``expire_idle`` (and the producer-id
  cleanup) run as the proxy runs them: the longest single call (the event loop's stall), the sensors left, and the
  resident set after (does memory return?). Also the cost of one producer-id cleanup pass at full size (it runs
  every second on the loop).

``--byte-rate-entity client-id``: the byte-rate quotas under ``/clients/<default>`` instead (no authentication's
usual configuration: each client id its own quota).

Usage: ``python bench/tenants.py [--tenants 1000000] [--users 100000] [--samples 200000] [--pace-us 20]
[--byte-rate-entity pair|client-id]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from config.loader import parse_config  # noqa: E402
from proxy.enforcement.proxy_quotas import ProxyQuotas  # noqa: E402
from proxy.housekeeping import EXPIRY_BATCH, PID_CLEANUP_BATCH  # noqa: E402
from quota.primitives.clock import ManualClock  # noqa: E402

HOUR_MS = 3_600_000


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


BYTE_RATE_ENTITIES = {"pair": {"user": "<default>", "client-id": "<default>"}, "client-id": {"client-id": "<default>"}}


def build(clock: ManualClock, byte_rate_entity: str = "pair") -> ProxyQuotas:
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
            "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
            "metrics": {"bind": "127.0.0.1:0"},
            "quotas": [
                {
                    "entity": BYTE_RATE_ENTITIES[byte_rate_entity],
                    "producer_byte_rate": 10**12,
                    "consumer_byte_rate": 10**12,
                },
                {"entity": {"user": "<default>"}, "producer_ids_rate": 10**9},
            ],
            "dynamic_config": {"enabled": False},
        }
    )
    return ProxyQuotas(config, clock)


def tenant(i: int, users: int) -> tuple[str, str, int]:
    """(user, client id, producer id) of tenant ``i``."""
    return f"user-{i % users:06d}", f"tenant-{i:07d}", 1_000_000 + i


class Pace:
    """The manual clock moved ``pace_us`` per tenant visited (kept in microseconds, read in milliseconds)."""

    def __init__(self, clock: ManualClock, pace_us: float) -> None:
        self.clock, self.pace_us, self.us = clock, pace_us, clock.now_ms() * 1000.0

    def next(self) -> int:
        self.us += self.pace_us
        self.clock.set(int(self.us // 1000))
        return self.clock.now_ms()


def populate(quotas: ProxyQuotas, clock: ManualClock, tenants: int, users: int, pace_us: float) -> None:
    produce, fetch, pids = quotas.produce, quotas.fetch, quotas.producer_ids
    pace = Pace(clock, pace_us)
    for i in range(tenants):
        user, client_id, pid = tenant(i, users)
        now = pace.next()
        produce.record_and_decide(user, client_id, 1_000 + i % 997, now)
        fetch.record_and_decide(user, client_id, 2_000 + i % 991, now)
        pids.record_and_decide(user, pid, now)
    gc.collect()


def decision_costs(
    quotas: ProxyQuotas, clock: ManualClock, tenants: int, users: int, samples: int, pace_us: float, seed: int = 25
) -> dict[str, list[int]]:
    """Nanoseconds of each call, on random tenants; the clock moves ``pace_us`` per tenant visited."""
    produce, fetch, pids = quotas.produce, quotas.fetch, quotas.producer_ids
    pace = Pace(clock, pace_us)
    rng = random.Random(seed)
    picks = [tenant(rng.randrange(tenants), users) for _ in range(samples)]
    others = [tuple(produce.resolve(*tenant(rng.randrange(tenants), users)[:2]).tags) for _ in range(samples)]
    table = produce.keeper.by_tags
    costs: dict[str, list[int]] = {"produce": [], "fetch": [], "floor": []}
    timer = time.perf_counter_ns
    gc.disable()  # a collection inside one timed call is the collector's cost, not the decision's
    try:
        for (user, client_id, pid), other in zip(picks, others):
            now = pace.next()
            began = timer()
            _ = table.get(other).last_record_ms
            costs["floor"].append(timer() - began)
            began = timer()
            produce.record_and_decide(user, client_id, 1_000, now)
            pids.record_and_decide(user, pid, now)
            costs["produce"].append(timer() - began)
            began = timer()
            fetch.remaining_in_quota_window(user, client_id, now)
            fetch.record_and_decide(user, client_id, 2_000, now)
            costs["fetch"].append(timer() - began)
    finally:
        gc.enable()
    return costs


def percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def expiry(quotas: ProxyQuotas, clock: ManualClock, rss_before_tenants: int, tenants: int) -> None:
    """Past the hour: what the housekeeping does (every 60 s: expire_idle; every second: producer-id cleanup)."""
    before = rss_bytes()
    began = time.perf_counter()
    quotas.producer_ids.cleanup(clock.now_ms(), PID_CLEANUP_BATCH)
    pid_pass = time.perf_counter() - began
    print(
        f"producer-id cleanup at {len(quotas.producer_ids):,} users (nothing to drop; runs every second on the "
        f"loop, {PID_CLEANUP_BATCH:,} users a call): {pid_pass * 1000:.1f} ms"
    )
    clock.advance(HOUR_MS + 1_000)
    now = clock.now_ms()
    t = time.perf_counter()
    quotas.produce.record_and_decide("user-new", "tenant-new", 1_000, now)  # the request path meets them first
    print(
        f"the first produce decision after the hour, with every tenant idle past it: "
        f"{(time.perf_counter() - t) * 1e6:,.0f} us"
    )
    calls, longest, dropped = 0, 0.0, 0
    began = time.perf_counter()
    while True:  # as the housekeeping does: a batch per manager, then the loop's other work, until nothing is left
        t = time.perf_counter()
        n = quotas.expire_idle(EXPIRY_BATCH)
        longest = max(longest, time.perf_counter() - t)
        calls += 1
        dropped += n
        if not n:
            break
    expire_s = time.perf_counter() - began
    t = time.perf_counter()
    pid_calls, pid_longest = 0, 0.0
    while len(quotas.producer_ids):
        t1 = time.perf_counter()
        quotas.producer_ids.cleanup(now, PID_CLEANUP_BATCH)
        pid_longest = max(pid_longest, time.perf_counter() - t1)
        pid_calls += 1
        if pid_calls > 10_000:
            break
    gc.collect()
    after = rss_bytes()
    print(
        f"expiry after {HOUR_MS // 60_000} min idle: {dropped:,} sensors dropped in {calls:,} expire_idle calls, "
        f"{expire_s:.2f} s in all, longest call (an event-loop stall) {longest * 1000:.0f} ms; producer-id users "
        f"left {len(quotas.producer_ids):,} after {pid_calls} cleanups (longest {pid_longest * 1000:.0f} ms); "
        f"sensors left {len(quotas.produce) + len(quotas.fetch):,}"
    )
    grown = before - rss_before_tenants
    print(
        f"resident set: {rss_before_tenants / 2**20:.0f} MiB before the tenants, {before / 2**20:.0f} MiB with "
        f"them, {after / 2**20:.0f} MiB after expiry ({(before - after) / max(grown, 1) * 100:.0f} % of what the "
        f"tenants took returned)"
    )


ROUNDS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument(
        "--pace-us", type=float, default=20.0, help="simulated microseconds per tenant visited (a Produce and a Fetch)"
    )
    parser.add_argument(
        "--byte-rate-entity",
        choices=sorted(BYTE_RATE_ENTITIES),
        default="pair",
        help="the byte-rate quotas' entity: /users/<default>/clients/<default> or /clients/<default>",
    )
    args = parser.parse_args()
    print(f"clock: {args.pace_us:g} us per tenant visited ({2e6 / args.pace_us:,.0f} requests/s)")

    sizes = {"10 tenants": (10, 10), f"{args.tenants:,} tenants": (args.tenants, args.users)}
    built = {}
    for label, (tenants, users) in sizes.items():
        clock = ManualClock(1_000_000)
        quotas = build(clock, args.byte_rate_entity)
        gc.collect()
        rss0 = rss_bytes()
        began = time.perf_counter()
        populate(quotas, clock, tenants, users, args.pace_us)
        took = time.perf_counter() - began
        rss1 = rss_bytes()
        built[label] = (quotas, clock, rss0)
        print(
            f"{label}: populated in {took:.1f} s ({len(quotas.produce):,} + {len(quotas.fetch):,} byte-rate sensors,"
            f" {len(quotas.producer_ids):,} producer-id users); resident set +{(rss1 - rss0) / 2**20:.0f} MiB"
            + (f" = {(rss1 - rss0) / tenants / 1024:.2f} KiB per tenant" if tenants > 1000 else "")
        )
    costs: dict[str, dict[str, list[int]]] = {label: {} for label in sizes}
    for round_ in range(ROUNDS + 1):  # interleaved, so the machine's load falls on both sizes alike
        for label, (tenants, users) in sizes.items():
            quotas, clock, _ = built[label]
            found = decision_costs(quotas, clock, tenants, users, args.samples // ROUNDS, args.pace_us, 25 + round_)
            for kind, values in found.items():
                if round_:  # the first round warms up and is not counted
                    costs[label].setdefault(kind, []).extend(values)
    results = {
        label: {kind: (percentile(c, 0.5), percentile(c, 0.99)) for kind, c in found.items()}
        for label, found in costs.items()
    }
    for label, found in results.items():
        for kind, (p50, p99) in found.items():
            print(
                f"  {label}, {kind}{'' if kind == 'floor' else ' decision'}: p50 {p50 / 1000:.2f} us, p99 {p99 / 1000:.2f} us"
            )
    small, big = results.values()
    for kind in small:
        for i, name in enumerate(("p50", "p99")):
            ratio = big[kind][i] / small[kind][i]
            grown = (big[kind][i] - small[kind][i]) / 1000
            if kind == "floor":
                print(
                    f"floor (one table lookup and one field) {name}: {ratio:.2f} x the cost with 10 tenants, "
                    f"{grown:+.2f} us: what touching one tenant's entry adds at this size"
                )
                continue
            print(
                f"{kind} decision {name}: {ratio:.2f} x the cost with 10 tenants ({grown:+.2f} us; target <= 1.2 x): "
                + ("met" if ratio <= 1.2 else "MISSED")
            )
    del costs, found, values  # the bench's own 4 x 10^5 timings, made among the tenants' objects: not the proxy's
    quotas, clock, rss0 = built.pop(f"{args.tenants:,} tenants")
    expiry(quotas, clock, rss0, args.tenants)


if __name__ == "__main__":
    main()
