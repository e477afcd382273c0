"""Pass-through beside the anchors: direct, the proxy and the minimal relay in front of the same Apache Kafka.

The peer proxy, Kroxylicious, is measured in bench/anchors_kroxylicious.py; this script measures the proxy against
the floor of any user-space relay: bench/relay_floor.py's uvloop relay that parses nothing.

One Apache Kafka 4.4.0 broker with three listeners: one advertised as itself (direct), one advertised as the proxy
(its own process, in front of it, default settings, no quotas, dynamic config off), one advertised as the relay (its
own process). Paths rotate every round. Per round and path: confluent-kafka produces ``--messages`` 1 KiB messages
(acks=all, linger 5 ms) to a fresh 4-partition topic and reads them back (``bench/passthrough.py``'s measurement);
then a request-heavy phase: ``--small`` 100-byte messages, each its own Produce request (linger 0, one message per
batch, one partition). Reported: throughput ratio to direct (median of rounds), added single-produce latency
p50/p99 (linger 0, acks=all), and the CPU seconds of each relay process (user + system, from /proc) per GB carried
(produce + consume bytes) and per 10^5 requests (the small phase; its request count is the proxy's
``requests_total``, the same workload on both paths), the stable figures on a shared machine.

Targets (the project's): the proxy's CPU per GB within 1.5 x the relay's (big frames are spliced, not copied through
Python) and per 10^5 requests within 3 x (the relay parses nothing; the proxy reads every header and decodes what
quotas need).

Usage: ``python bench/anchors_passthrough.py [--messages 200000] [--rounds 4] [--small 20000]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_common import ProxyProcess, Verdicts, cpu_seconds, load, median, percentile  # noqa: E402
from bench.common import wait_for_port  # noqa: E402
from bench.passthrough import PAYLOAD, consume, create_topic, latencies, produce  # noqa: E402
from bench.relay_floor import RELAY  # noqa: E402
from tests.kafka_cluster import ExtraListener, KafkaCluster  # noqa: E402

GB_TARGET, REQUEST_TARGET = 1.5, 3.0


def small_requests(bootstrap: str, topic: str, count: int) -> float:
    """``count`` 100-byte messages, each its own Produce request (acks=1); returns messages/s."""
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": 1, "max.in.flight": 5}
    )
    p.produce(topic, b"s" * 100)
    p.flush(30)
    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, b"s" * 100)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(120)
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--latency-samples", type=int, default=1000)
    args = parser.parse_args()
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors-pass", extra_listeners={"RELAY": ExtraListener("PLAINTEXT")}).start()
    node = cluster.nodes[0]
    relay_port = node.extra_advertised["RELAY"]
    relay = subprocess.Popen([sys.executable, "-c", RELAY, str(relay_port), str(node.extra_ports["RELAY"])])
    proxy = None
    try:
        proxy = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}").start()
        wait_for_port(relay_port)
        paths = {"direct": node.direct, "proxy": f"127.0.0.1:{node.proxy_port}", "relay": f"127.0.0.1:{relay_port}"}
        pids = {"proxy": proxy.proc.pid, "relay": relay.pid}
        rates = {p: {"produce": [], "consume": [], "small": []} for p in paths}
        cpu = {p: {"bulk": 0.0, "small": 0.0} for p in pids}
        requests = 0.0
        loads = [load()]
        names = list(paths)
        for r in range(args.rounds):
            for name in names[r % 3 :] + names[: r % 3]:  # rotate who goes first
                bootstrap = paths[name]
                topic, small = f"pass-{name}-{r}", f"pass-small-{name}-{r}"
                create_topic(node.direct, topic)
                create_topic(node.direct, small, 1)
                c0 = cpu_seconds(pids[name]) if name in pids else 0.0
                rates[name]["produce"].append(produce(bootstrap, topic, args.messages))
                rates[name]["consume"].append(consume(bootstrap, topic, args.messages))
                c1 = cpu_seconds(pids[name]) if name in pids else 0.0
                q0 = proxy.metric("requests_total") if name == "proxy" else 0.0
                rates[name]["small"].append(small_requests(bootstrap, small, args.small))
                c2 = cpu_seconds(pids[name]) if name in pids else 0.0
                if name in pids:
                    cpu[name]["bulk"] += c1 - c0
                    cpu[name]["small"] += c2 - c1
                if name == "proxy":
                    requests += proxy.metric("requests_total") - q0
            loads.append(load())
        lat = {}
        for name, bootstrap in paths.items():
            create_topic(node.direct, f"lat-{name}")
            lat[name] = latencies(bootstrap, f"lat-{name}", args.latency_samples)
        loads.append(load())
    finally:
        if proxy is not None:
            proxy.stop()
        relay.terminate()
        relay.wait(10)
        cluster.stop()
    gb = args.rounds * args.messages * len(PAYLOAD) * 2 / 1e9
    print(
        f"Apache Kafka 4.4.0, confluent-kafka, {args.rounds} rounds of {args.messages} x 1 KiB (produce + consume) "
        f"and {args.small} single-message requests; load {' '.join(loads)}"
    )
    for kind in ("produce", "consume", "small"):
        d = median(rates["direct"][kind])
        line = f"  {kind:8} direct {d:9.0f} msg/s"
        for name in ("proxy", "relay"):
            per_round = " ".join(f"{x / y:.2f}" for x, y in zip(rates[name][kind], rates["direct"][kind]))
            line += f" | {name} {median(rates[name][kind]) / d:.3f} x ({per_round})"
        print(line)
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        d = percentile(lat["direct"], q)
        print(
            f"  single-produce {label}: direct {d:.2f} ms, added: proxy {percentile(lat['proxy'], q) - d:+.2f} ms, "
            f"relay {percentile(lat['relay'], q) - d:+.2f} ms"
        )
    per_gb = {name: cpu[name]["bulk"] / gb for name in pids}
    per_req = {name: cpu[name]["small"] / requests * 1e5 if requests else float("nan") for name in pids}
    for name in pids:
        print(
            f"  {name:6} CPU {per_gb[name]:6.2f} s/GB, {per_req[name]:6.2f} s per 10^5 requests "
            f"({cpu[name]['bulk']:.1f} s bulk, {cpu[name]['small']:.1f} s small)"
        )
    print(f"  (requests in the small phases, as the proxy counted them: {requests:.0f})")
    verdicts.check(
        "proxy CPU per GB within 1.5 x the relay's",
        per_gb["proxy"] <= GB_TARGET * per_gb["relay"],
        f"{per_gb['proxy'] / per_gb['relay']:.2f} x",
    )
    verdicts.check(
        "proxy CPU per 10^5 requests within 3 x the relay's",
        per_req["proxy"] <= REQUEST_TARGET * per_req["relay"],
        f"{per_req['proxy'] / per_req['relay']:.2f} x",
    )
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
