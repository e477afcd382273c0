"""KIP-599 beside Kafka's own ``controller_mutation_rate``: the same topic-creation storm, strict and old versions.

One Apache Kafka 4.4.0 broker. A client creates 10-partition topics one request after another for ``--duration``
seconds under ``controller_mutation_rate`` (10 partitions/s by default, Kafka's default windows 11 x 1 s: a burst of
about 110 partitions): once with the quota set in Kafka (kafka-configs on the broker, the client connecting directly),
once with it set in the proxy (its own process in front of the broker, which has no quota for that client id). The
storms run one after another, so the controller serves one at a time.

- strict versions: kafka-python 3 (CreateTopics v7): topics over the quota are refused with
  THROTTLING_QUOTA_EXCEEDED (89); the client waits out the ``throttle_time_ms`` it was given (kafka-python pauses the
  node for it, failing requests to it at once, and does not return the throttle: the throttle reported is how long
  each pause lasted, 10 ms coarse) and retries;
- old versions: confluent-kafka (librdkafka, CreateTopics v4): requests go through whole and the client is throttled
  afterwards (``throttle_cb``).

Reported per storm: topics admitted per second (what the broker created, counted at the end), partitions admitted
against what the bucket allows (burst + rate x elapsed + one topic), topics refused, and the throttle the client
was told (count, sum, largest). Targets: on each path the bucket's bound holds and the client is throttled; the
proxy admits within 10 % (and one topic) of what Kafka admits.

Usage: ``python bench/anchors_mutation.py [--duration 20] [--rate 10]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

PARTITIONS = 10
WINDOW_NUM = 11  # Kafka's default controller.quota.window.num (window 1 s)
THROTTLING_QUOTA_EXCEEDED = 89


def strict_storm(bootstrap: str, client_id: str, prefix: str, duration: float) -> dict:
    """kafka-python: one 10-partition topic per request; a refusal's throttle waited out, as the client does."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NodeNotReadyError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id, request_timeout_ms=30000)
    out = {"sent": 0, "refused": 0, "throttles": [], "names": []}
    start = time.monotonic()
    i, paused_since = 0, None
    try:
        while time.monotonic() - start < duration:
            name = f"{prefix}-{i}"
            try:
                answer = admin.create_topics(
                    {name: {"num_partitions": PARTITIONS, "replication_factor": 1}}, raise_errors=False
                )
            except NodeNotReadyError:  # paused for the throttle it was told
                paused_since = paused_since or time.monotonic()
                time.sleep(0.01)
                continue
            if paused_since is not None:  # kafka-python keeps throttle_time_ms to itself: the pause it made
                out["throttles"].append((time.monotonic() - paused_since) * 1000)
                paused_since = None
            i += 1
            out["sent"] += 1
            out["names"].append(name)
            if any(t["error_code"] == THROTTLING_QUOTA_EXCEEDED for t in answer["topics"]):
                out["refused"] += 1
    finally:
        out["elapsed"] = time.monotonic() - start
        admin.close()
    return out


def old_storm(bootstrap: str, client_id: str, prefix: str, duration: float) -> dict:
    """confluent-kafka: the same storm with CreateTopics v4; the throttle comes back after the topics are made."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    out = {"sent": 0, "refused": 0, "throttles": [], "names": []}
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "throttle_cb": lambda event: out["throttles"].append(event.throttle_time * 1000),
        }
    )
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < duration:
        name = f"{prefix}-{i}"
        i += 1
        out["sent"] += 1
        out["names"].append(name)
        try:
            admin.create_topics([NewTopic(name, PARTITIONS, 1)], request_timeout=30)[name].result(60)
        except KafkaException as error:
            if error.args[0].code() == THROTTLING_QUOTA_EXCEEDED:
                out["refused"] += 1
        admin.poll(0)
    out["elapsed"] = time.monotonic() - start
    admin.poll(0.2)
    return out


def created(cluster: KafkaCluster, names) -> int:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.nodes[0].direct, client_id="anchor-lister")
    try:
        return len(set(names) & set(admin.list_topics()))
    finally:
        admin.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=20, help="seconds per storm")
    parser.add_argument("--rate", type=float, default=10, help="controller_mutation_rate, partitions/s")
    args = parser.parse_args()
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors-mutation").start()
    node = cluster.nodes[0]
    storms = {
        "strict (kafka-python, CreateTopics v7)": ("kp", strict_storm),
        "old (confluent-kafka, CreateTopics v4)": ("ck", old_storm),
    }
    quotas = [
        {"entity": {"client-id": f"anchor-proxy-{tag}"}, "controller_mutation_rate": args.rate}
        for tag, _ in storms.values()
    ]
    proxy = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}", quotas).start()
    burst = args.rate * WINDOW_NUM
    print(
        f"Apache Kafka 4.4.0, one node; controller_mutation_rate {args.rate:g}/s, windows {WINDOW_NUM} x 1 s "
        f"(burst {burst:g}); {PARTITIONS}-partition topics, {args.duration:g} s per storm"
    )
    try:
        for tag, _ in storms.values():
            kafka_client_quota(cluster, f"anchor-kafka-{tag}", controller_mutation_rate=args.rate)
        for label, (tag, storm) in storms.items():
            results = {}
            for path, bootstrap in (("kafka", node.direct), ("proxy", f"127.0.0.1:{node.proxy_port}")):
                time.sleep(2)
                before = load()
                out = storm(bootstrap, f"anchor-{path}-{tag}", f"anchor-{path}-{tag}", args.duration)
                out["created"] = created(cluster, out["names"])
                out["load"] = f"{before}-{load()}"
                results[path] = out
            print(f"\n{label}")
            print(
                f"  {'path':6} {'requests':>8} {'created':>7} {'topics/s':>8} {'partitions':>10} "
                f"{'bucket allows':>13} {'refused 89':>10} {'throttles':>9} {'sum ms':>8} {'max ms':>7}  load"
            )
            for path, out in results.items():
                allows = burst + args.rate * out["elapsed"] + PARTITIONS
                out["allows"] = allows
                throttles = out["throttles"]
                print(
                    f"  {path:6} {out['sent']:8} {out['created']:7} {out['created'] / out['elapsed']:8.2f} "
                    f"{out['created'] * PARTITIONS:10} {allows:13.0f} {out['refused']:10} {len(throttles):9} "
                    f"{sum(throttles):8.0f} {max(throttles, default=0):7.0f}  {out['load']}"
                )
            for path, out in results.items():
                verdicts.check(
                    f"{label} {path}: within the bucket",
                    out["created"] * PARTITIONS <= out["allows"],
                    f"{out['created'] * PARTITIONS} partitions, bucket allows {out['allows']:.0f}",
                )
                verdicts.check(
                    f"{label} {path}: client throttled",
                    bool(out["throttles"]),
                    f"{len(out['throttles'])} throttles told",
                )
            k, p = (
                results["kafka"]["created"] / results["kafka"]["elapsed"],
                results["proxy"]["created"] / results["proxy"]["elapsed"],
            )
            verdicts.check(
                f"{label}: proxy admits as Kafka does",
                abs(p - k) <= 0.1 * k + 1 / args.duration,
                f"proxy {p:.2f} topics/s vs Kafka {k:.2f}",
            )
    finally:
        proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
