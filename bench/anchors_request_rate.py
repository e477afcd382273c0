"""A consumer group rebalancing in a loop held to its ``request_rate``, and a well-behaved group beside it, in one run.

No peer has a figure to run beside: Kafka's request quota, ``request_percentage`` (KIP-124), is a share of the
broker's thread time, which a proxy cannot see, and it holds no request count; Conduktor Gateway (commercial, not
run here) answers a JoinGroup over its limit with a fixed 100 ms throttle, which slows a storm by a constant rather
than holding it to a rate. So the anchors are the target itself and a calm group connecting directly to Kafka.
One Apache Kafka 4.4.0 broker (tests/kafka_cluster.py) behind a sidecar proxy (its own process), Kafka's default
windows (11 x 1 s), ``quota.request.rate.apis: JoinGroup,SyncGroup``; ``{group: storm}`` sets ``request_rate``
``--quota``, ``{group: "<default>"}`` 1000 (every other group, each on its own). Members:
tests/integration/kafka/group_members.py (session 6 s, Kafka's least, heartbeats every 0.5 s, roundrobin), so
``quota.request.rate.max.throttle.ms`` is ``--max-throttle-ms``, by default the proxy's default, 2000, a third of the
session (at 5 s, the proxy's default before, one or two librdkafka members were evicted in each of three 60 s runs:
muted up to 5 s, their heartbeats missed the 6 s session).

- **demand**: the storm (two librdkafka members, one aiokafka, one of Kafka's Java consumer, each changing its
  subscription whenever it has been assigned) as group ``unheld`` for ``--demand`` seconds through the proxy: its
  JoinGroup + SyncGroup per second under the ``<default>`` entry, what it asks;
- **storm**: the same members as group ``storm`` for ``--duration`` seconds. The storm's requests are read from the
  proxy's ``request_rate_requests_total{group="storm"}`` each second (it counts every such request it forwards;
  nothing is refused); achieved / quota is the least-squares slope of that count from the end of the first window
  span (11 s: a fresh group may spend 10 s of its quota at once) to the end of the phase, target within 0.95-1.05.
  In the same seconds a calm group of two librdkafka members (``calm``, through the proxy) and its twin connecting
  directly (``calm-direct``) each see a new member join and leave in turn, ``--joins`` times: the time from the
  new member's subscribe to its assignment is the calm group's rebalance (its members rejoin on their next
  heartbeat). Target: the median through the proxy at most 1.2 x the median direct;
- **evicted**: members of any group whose member id changed, or whose partitions were lost: target 0.

Exits 1 on a missed target. Usage: ``python bench/anchors_request_rate.py [--duration 60] [--quota 4]
[--demand 15] [--joins 10] [--max-throttle-ms 2000]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.anchors_byte_rate import SPAN_S, steady_rate  # noqa: E402
from bench.anchors_common import ProxyProcess, Verdicts, load, median, percentile  # noqa: E402
from tests.integration.kafka.group_members import AioMember, JavaMember, RdMember, joined_in  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

BAND = (0.95, 1.05)
REBALANCE_AT_MOST = 1.2  # the calm group's median rebalance through the proxy, x its median direct
ONE, TWO = "rr-one", "rr-two"


class Storm:
    """The storm's four members in group ``group``: two librdkafka (polled and flipped by a thread of its own), one
    aiokafka, one Java consumer (both flip by themselves)."""

    def __init__(self, cluster: KafkaCluster, bootstrap: str, group: str) -> None:
        self.java = JavaMember(cluster, bootstrap, group, f"{group}-java", [ONE], flip=[ONE, TWO])
        self.rd = [RdMember(bootstrap, group, f"{group}-rd-{i}", [ONE]) for i in range(2)]
        self.aio = AioMember(bootstrap, group, f"{group}-aio", [ONE], flip=[ONE, TWO])
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._flip, daemon=True)
        self.thread.start()

    def _flip(self) -> None:
        flips = 0
        while not self.stop.is_set():
            for member in self.rd:
                member.poll()
                if member.consumer.assignment():
                    flips += 1
                    member.consumer.subscribe([ONE] if flips % 2 else [ONE, TWO])

    def close(self) -> list[str]:
        """Stop every member; returns those that were evicted (a new member id, or partitions lost), with their
        member ids."""
        self.stop.set()
        self.thread.join(30)
        evicted = [f"{m.client_id} {m.first_id} -> {m.member_id()}" for m in self.rd if m.member_id() != m.first_id]
        for member in self.rd:
            member.close()
        self.aio.close()
        if self.aio.last_id != self.aio.first_id:
            evicted.append(f"{self.aio.client_id} {self.aio.first_id} -> {self.aio.last_id}")
        self.java.close()
        ids, lost = self.java.member_ids("assigned"), self.java.member_ids("lost")
        if len(set(ids)) > 1 or lost:
            evicted.append(f"{self.java.client_id} {sorted(set(ids))}, lost as {lost}")
        return evicted


class Calm:
    """Two librdkafka members of ``group`` that join once and stay, polled by a thread of their own."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.members = [RdMember(bootstrap, group, f"{group}-{i}", [ONE]) for i in range(2)]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stop.is_set():
            for member in self.members:
                member.poll()

    def close(self) -> list[str]:
        self.stop.set()
        self.thread.join(30)
        evicted = [
            f"{m.client_id} {m.first_id} -> {m.member_id()}" for m in self.members if m.member_id() != m.first_id
        ]
        for member in self.members:
            member.close()
        return evicted


def counts_each_second(proxy: ProxyProcess, group: str, seconds: int) -> list[float]:
    """The proxy's count of ``group``'s requests, read at the start of each of ``seconds`` seconds and at the end."""
    out, t0 = [], time.monotonic()
    for i in range(seconds + 1):
        time.sleep(max(0.0, t0 + i - time.monotonic()))
        out.append(proxy.metric("request_rate_requests_total", group=group))
    return out


def rebalances(proxy_bootstrap: str, direct_bootstrap: str, joins: int, stop: threading.Event, out: dict) -> None:
    """A new member joins ``calm`` (through the proxy) and ``calm-direct`` in turn, ``joins`` times each: the seconds
    each took to be assigned, into ``out["proxy"]`` and ``out["direct"]``."""
    for _ in range(joins):
        for where, bootstrap, group in (
            ("proxy", proxy_bootstrap, "calm"),
            ("direct", direct_bootstrap, "calm-direct"),
        ):
            if stop.is_set():
                return
            out[where].append(joined_in(bootstrap, group, ONE))
            time.sleep(1.0)  # deliberate: its leaving's rebalance over before the next join


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds of the held storm (default 60)")
    parser.add_argument("--quota", type=float, default=4.0, help="the storm group's request_rate (default 4)")
    parser.add_argument("--demand", type=int, default=15, help="seconds of the storm unheld (default 15)")
    parser.add_argument("--joins", type=int, default=10, help="rebalances timed per calm group (default 10)")
    parser.add_argument(
        "--max-throttle-ms", type=int, default=2000, help="quota.request.rate.max.throttle.ms (default 2000)"
    )
    args = parser.parse_args()
    if args.duration < 4 * SPAN_S:  # the sampled rate bursts as each window span's oldest samples leave it
        parser.error(f"--duration must be at least {4 * SPAN_S} s: the first window span left out, three measured")
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors-reqrate").start()
    node = cluster.nodes[0]
    quotas = [
        {"entity": {"group": "storm"}, "request_rate": args.quota},
        {"entity": {"group": "<default>"}, "request_rate": 1000},
    ]
    settings = {
        "quota.request.rate.apis": "JoinGroup,SyncGroup",
        "quota.request.rate.max.throttle.ms": args.max_throttle_ms,
    }
    proxy = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}", quotas, settings)
    try:
        proxy.start()
        bootstrap = f"127.0.0.1:{node.proxy_port}"
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.direct})
        # six partitions: a calm group's two members and its newcomer get some each (an empty assignment would not
        # tell the newcomer's join was done), as does each of the storm's four
        for done in admin.create_topics([NewTopic(name, 6, 1) for name in (ONE, TWO)]).values():
            done.result(60)
        print(
            f"Apache Kafka 4.4.0, one node; {{group: storm}} request_rate {args.quota:g}/s of JoinGroup + SyncGroup, "
            f"windows 11 x 1 s, throttles at most {args.max_throttle_ms} ms; load {load()}\n"
            "No peer figure beside it: Kafka's request quota (request_percentage) is broker thread time, which a "
            "proxy cannot see, and counts no requests; Conduktor Gateway (commercial, not run) answers JoinGroup "
            "over its limit with a fixed 100 ms throttle. Anchors: the quota itself, and a calm group direct."
        )
        evicted: list[str] = []

        unheld = Storm(cluster, bootstrap, "unheld")
        try:
            counts = counts_each_second(proxy, "<default>", args.demand)  # alone under that entry for now
        finally:
            evicted += unheld.close()
        demand = (counts[-1] - counts[2]) / (args.demand - 2)  # the JVM's start left out
        print(f"demand: the storm unheld asks {demand:.1f} requests/s ({demand / args.quota:.1f} x the quota)")

        calm, calm_direct = Calm(bootstrap, "calm"), Calm(node.direct, "calm-direct")
        storm = Storm(cluster, bootstrap, "storm")
        times: dict = {"proxy": [], "direct": []}
        stop = threading.Event()
        timer = threading.Thread(target=rebalances, args=(bootstrap, node.direct, args.joins, stop, times))
        cpu0, load0 = proxy.cpu(), load()
        try:
            timer.start()
            counts = counts_each_second(proxy, "storm", args.duration)
            stop.set()
            timer.join(120)
        finally:
            stop.set()
            evicted += storm.close() + calm.close() + calm_direct.close()
        cpu = proxy.cpu() - cpu0
        seconds = [b - a for a, b in zip(counts, counts[1:])]
        rate, mean = steady_rate(seconds, args.quota)
        throttled = proxy.metric("request_rate_throttled_requests_total", group="storm")
        print(
            f"storm (load {load0}-{load()}): {rate:.3f} x its quota (mean {mean:.3f}), {counts[-1]:.0f} requests, "
            f"{throttled:.0f} throttled; proxy CPU {cpu:.1f} s; each second {[round(s, 1) for s in seconds]}"
        )
        through, direct = median(times["proxy"]), median(times["direct"])
        print(
            f"calm group's rebalance: through the proxy median {through:.3f} s, p90 "
            f"{percentile(times['proxy'], 0.9):.3f} s ({len(times['proxy'])}); direct median {direct:.3f} s, p90 "
            f"{percentile(times['direct'], 0.9):.3f} s ({len(times['direct'])}); ratio {through / direct:.2f}"
        )
        verdicts.check("storm held to its quota", BAND[0] <= rate <= BAND[1], f"{rate:.3f} x")
        verdicts.check("storm asked more than its quota", demand > 1.5 * args.quota, f"{demand / args.quota:.1f} x")
        verdicts.check(
            "calm group rebalances as fast as direct",
            len(times["proxy"]) == len(times["direct"]) == args.joins and through <= REBALANCE_AT_MOST * direct,
            f"{through / direct:.2f} x direct (at most {REBALANCE_AT_MOST})",
        )
        verdicts.check("members evicted", not evicted, f"{len(evicted)} {evicted}")
    finally:
        proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
