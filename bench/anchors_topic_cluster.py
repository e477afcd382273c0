"""A topic quota under ``quota.scope: cluster`` held against its target across sidecars, with KIP-1010's skewed
leaders (issue 47), in one run.

KIP-1010's example is the target: a topic's quota is the topic's, whichever brokers lead its partitions, so a topic
whose leaders are skewed gets its whole quota, not a broker's share of it. Apache Kafka 4.4.0, three nodes
(tests/kafka_cluster.py: docker-compose.yml's layout, replication factor 3, ``min.insync.replicas`` 2), one sidecar
proxy in front of each node, each its own process, as examples/cluster-budgets.yaml runs them: ``quota.scope:
cluster``, one usage topic (created by the sidecars), their own clients on the brokers' PROXIES listener, the
documented sync settings (``quota.cluster.sync.ms`` 1000, ``quota.cluster.stale.ms`` 10000; ``quota.smoothing`` on,
its default with a usage topic; windows 11 x 1 s).

One phase per entry of ``--sidecars``, each ``--duration`` seconds: a 6-partition topic whose entry sets
``producer_byte_rate`` ``--quota``, its leaders placed by CreateTopics' manual assignment on 1, 2 or 3 brokers, 4
of them on broker 1 (1: all six; 2: four and two; 3: four, one and one), so its bytes go through that many sidecars,
most through sidecar 1. Two librdkafka producers at their default settings (client ids ``tenant-0`` and
``tenant-1``, bootstrapped through sidecar 1) ask for ``--asked`` x the quota together (1.5 by default), 1000-byte
values every 100 ms, each message to the next partition in turn (as messages with many keys spread), so each broker
is asked for its leaders' part whatever the others get: 4/6 of the topic's bytes through sidecar 1, 1.0 x the
quota (where a per-broker split of the quota would hold it to 1/3), and 1/6 through each of the others, 0.25 x.
Beside them, the first producer's client id writes another topic (no quota, its leaders on all three brokers) paced
at ``--bystander`` B/s: it must get what it asks for (at least 0.97 x), as it does alone before the phases.

Achieved / quota is the least-squares slope of the topic's acknowledged bytes per second, from the end of the first
window span (11 s) to the end of the phase (target: within 0.95-1.05); the plain mean is printed beside it, and each
sidecar's part of what the topic quota counted (``topic_quota_bytes_total``) and the throttle time it applied
(``topic_quota_throttle_time_seconds_total``: a phase below its quota with little throttling was held back by the
machine, not the quota). Exits 1 on a missed target.

Then, for contrast (``--no-split`` leaves it out), what a per-broker quota gives: the sidecars restarted under
``quota.scope: broker`` with quota / 3 each, nothing shared, the 3-sidecar topic written the same way (printed, no
target): broker 1's leaders are held to a third of the quota and the others take their 0.25 x, about 0.83 x in
total, where the shared quota gives the whole.

Usage: ``python bench/anchors_topic_cluster.py [--duration 60] [--quota 1048576] [--sidecars 1,2,3]
[--bystander 500000] [--asked 1.5] [--no-split]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.anchors_byte_rate import SPAN_S, steady_rate  # noqa: E402
from bench.anchors_byte_rate_clients import Series, threaded  # noqa: E402
from bench.anchors_common import ProxyProcess, Verdicts, load  # noqa: E402
from bench.anchors_topic_rate import (  # noqa: E402
    BAND,
    BYSTANDER_AT_LEAST,
    bystander_alone,
    paced_produce,
    run,
    seconds_of,
)
from tests.kafka_cluster import KafkaCluster  # noqa: E402

PARTITIONS = 6
LEADERS = {1: (1, 1, 1, 1, 1, 1), 2: (1, 1, 1, 1, 2, 2), 3: (1, 1, 1, 1, 2, 3)}
"""The broker (1-based, in the cluster's node order) leading each partition of the topic written through N sidecars."""
PRODUCERS = 2
TICK_S = 0.1
"""The topic's producers send every 100 ms: 1000-byte values sent every 10 ms over 6 partitions make a Produce
request of one or two values per partition, hundreds a second, which a loaded 2-core machine could not carry (the
topic at 0.2-0.3 x its quota for the first 12-40 s of a phase, throttled or not)."""
USAGE_TOPIC = "__kafka_quota_proxy_usage"
PEERS_TIMEOUT_S = 120


def assignment(leaders: tuple[int, ...], ids: list[int]) -> list[list[int]]:
    """Each partition's replicas, its leader first (the preferred leader, which a new topic's partition gets)."""
    return [[ids[(leader - 1 + k) % len(ids)] for k in range(len(ids))] for leader in leaders]


def sidecars_of(cluster: KafkaCluster, quota: int, topics: list[str], shared: bool = True) -> list[ProxyProcess]:
    """One sidecar per node, each ``topics`` at ``quota``: under ``quota.scope: cluster`` sharing the usage topic
    (``shared``), else each on its own (``quota.scope: broker``)."""
    quotas = [{"entity": {"topic": name}, "producer_byte_rate": quota} for name in topics]
    return [
        ProxyProcess(
            node.proxy_port,
            f"127.0.0.1:{node.client_port}",
            quotas,
            {
                "quota.scope": "cluster",
                "quota.cluster.topic": USAGE_TOPIC,
                "quota.cluster.id": f"sidecar-{node.node_id}",
            }
            if shared
            else {"quota.scope": "broker", "quota.smoothing": "on"},
            extra={
                "upstream": {
                    "bootstrap_servers": [f"127.0.0.1:{node.client_port}"],
                    "own_clients": {"bootstrap_servers": [node.proxies]},
                }
            },
        )
        for node in cluster.nodes
    ]


def phase(sidecars: list[ProxyProcess], bootstrap: str, topic: str, args, bystander: Series) -> tuple:
    """The topic's producers (and the bystander) paced for ``--duration`` s: the topic's rate and mean
    (slope and mean from the first window span on), each sidecar's part of what its topic quota counted, each
    second's bytes, and the producers' errors."""
    producers = [Series() for _ in range(PRODUCERS)]
    asked = args.quota * args.asked / PRODUCERS
    counted0 = [s.metric("topic_quota_bytes_total", quota="producer_byte_rate", topic=topic) for s in sidecars]
    held0 = [
        s.metric("topic_quota_throttle_time_seconds_total", quota="producer_byte_rate", topic=topic) for s in sidecars
    ]

    def clients(stop):
        threads = [
            threaded(
                partial(paced_produce, spread=PARTITIONS, tick_s=TICK_S),
                bootstrap,
                topic,
                f"tenant-{i}",
                asked,
                stop,
                series,
            )
            for i, series in enumerate(producers)
        ]
        threads.append(threaded(paced_produce, bootstrap, "free", "tenant-0", args.bystander, stop, bystander))
        return threads

    t0 = run(clients, args.duration)
    counted = [
        s.metric("topic_quota_bytes_total", quota="producer_byte_rate", topic=topic) - c0
        for s, c0 in zip(sidecars, counted0)
    ]
    held = [
        round(s.metric("topic_quota_throttle_time_seconds_total", quota="producer_byte_rate", topic=topic) - h0, 1)
        for s, h0 in zip(sidecars, held0)
    ]
    seconds = seconds_of(producers, t0, args.duration)
    rate, mean = steady_rate(seconds, args.quota)
    parts = [round(c / max(sum(counted), 1), 2) for c in counted]
    errors = [s.error for s in producers if s.error is not None]
    return rate, mean, parts, held, seconds, t0, errors


def wait_for_peers(sidecars: list[ProxyProcess]) -> None:
    """Until every sidecar counts the other two as fresh (each has read a record of each on the usage topic)."""
    deadline = time.monotonic() + PEERS_TIMEOUT_S
    while time.monotonic() < deadline:
        if all(s.metric("cluster_usage_peers", state="fresh") >= len(sidecars) - 1 for s in sidecars):
            return
        time.sleep(1)
    raise SystemExit(f"the sidecars did not see each other on {USAGE_TOPIC} within {PEERS_TIMEOUT_S} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per phase (default 60)")
    parser.add_argument("--quota", type=int, default=1024 * 1024, help="the topic's producer_byte_rate, B/s")
    parser.add_argument("--sidecars", default="1,2,3", help="sidecars the topic's leaders are behind, one phase each")
    parser.add_argument("--bystander", type=int, default=500_000, help="the bystander's paced rate, B/s")
    parser.add_argument("--asked", type=float, default=1.5, help="what the producers ask, x the quota (default 1.5)")
    parser.add_argument(
        "--split", action=argparse.BooleanOptionalAction, default=True, help="also the quota split per broker"
    )
    args = parser.parse_args()
    if args.duration <= SPAN_S + 5:
        parser.error(f"--duration must be more than {SPAN_S + 5} s (the first window span is left out)")
    counts = [int(n) for n in args.sidecars.split(",")]
    if not set(counts) <= set(LEADERS):
        parser.error(f"--sidecars: each of {sorted(LEADERS)}")
    verdicts = Verdicts()
    cluster = KafkaCluster(3, "anchors-topic-cluster").start()
    ids = [node.node_id for node in cluster.nodes]
    capped = {n: f"skewed-x{n}" for n in counts}
    sidecars = sidecars_of(cluster, args.quota, list(capped.values()))
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.direct_bootstrap})
        new = [NewTopic(capped[n], PARTITIONS, replica_assignment=assignment(LEADERS[n], ids)) for n in counts]
        new += [NewTopic(name, PARTITIONS, 3) for name in ("free", "free-alone")]
        for done in admin.create_topics(new).values():
            done.result(60)
        for sidecar in sidecars:
            sidecar.start()
        wait_for_peers(sidecars)
        bootstrap = f"127.0.0.1:{cluster.nodes[0].proxy_port}"
        print(
            f"Apache Kafka 4.4.0, three nodes; three sidecars, quota.scope cluster; topic quota {args.quota} B/s, "
            f"{PARTITIONS} partitions; load {load()}"
        )

        alone_rate = bystander_alone(bootstrap, args.bystander)
        print(f"bystander alone through the sidecars: {alone_rate / args.bystander:.2f} x the {args.bystander} B/s")

        for n in counts:
            bystander = Series()
            load0 = load()
            rate, mean, parts, held, seconds, t0, errors = phase(sidecars, bootstrap, capped[n], args, bystander)
            by = sum(seconds_of([bystander], t0, args.duration)[2:]) / (args.duration - 2)
            leaders = [f"{LEADERS[n].count(b)}/{PARTITIONS}" for b in (1, 2, 3)]
            print(
                f"through {n} sidecar(s), leaders {leaders} (load {load0}-{load()}): topic {rate:.3f} x its quota "
                f"(mean {mean:.3f}); each sidecar's part {parts}, throttle s {held}; each second {[round(s / args.quota, 2) for s in seconds]}"
            )
            verdicts.check(
                f"{n} sidecar(s): topic rate in band", BAND[0] <= rate <= BAND[1] and not errors, f"{rate:.3f} x"
            )
            verdicts.check(
                f"{n} sidecar(s): bystander on another topic, same client id",
                by >= BYSTANDER_AT_LEAST * min(alone_rate, args.bystander),
                f"{by / args.bystander:.2f} x asked (alone {alone_rate / args.bystander:.2f} x) {bystander.error or ''}",
            )

        if args.split and 3 in capped:  # what a per-broker quota gives: quota / 3 on each sidecar, nothing shared
            for sidecar in sidecars:
                sidecar.stop()
            sidecars = sidecars_of(cluster, args.quota // 3, [capped[3]], shared=False)
            for sidecar in sidecars:
                sidecar.start()
            load0 = load()
            rate, mean, parts, held, seconds, _, errors = phase(sidecars, bootstrap, capped[3], args, Series())
            print(
                f"split per broker (quota.scope broker, quota / 3 on each sidecar), leaders 4/6, 1/6, 1/6 (load "
                f"{load0}-{load()}): topic {rate:.3f} x its quota (mean {mean:.3f}); each sidecar's part {parts}, "
                f"throttle s {held} "
                f"{errors[:1]}"
            )
    finally:
        for sidecar in sidecars:
            if sidecar.proc is not None:
                sidecar.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
