"""The proxy beside Kroxylicious: the cost per byte and per request of each, in front of the same Apache Kafka broker.

One Apache Kafka 4.4.0 broker (tests/kafka_cluster.py) and three paths to it, interleaved: direct (the broker's
own addresses), Kroxylicious 0.12.0 (tools/fetch_kroxylicious.py: its runtime from Maven Central, one virtual
cluster, a ``portIdentifiesNode`` gateway, no filters) and the proxy in cluster mode (``broker_port_base``; a
producer and consumer byte rate, a producer-id rate and a controller mutation rate configured for every user and
client-id, far above what the workloads reach, so every request is metered and none is throttled). Each relay is
its own process. After one warm-up pass on every path (the JVM compiles its hot code; discarded), ``--rounds``
rounds, the paths' order rotated each round, each path running bench/rdkafka_workloads.py's librdkafka workloads:

- batched: ``--messages`` 1 KiB messages produced (linger 5 ms, acks=all) to a fresh 4-partition topic, then read
  back;
- single: ``--small`` 100-byte messages, each its own Produce request (``linger.ms`` 0, ``batch.num.messages`` 1);
- group: a consumer group of ``--consumers`` polling a 100-partition topic (``fetch.wait.max.ms`` 10) for
  ``--group-seconds`` once every member has its partitions.

Reported per workload and path: throughput (median of rounds; its ratio to direct and, for the proxy, to
Kroxylicious, with the ratios per round), the request round trip librdkafka measured (p50 and p99 of its windows,
averaged weighted by requests; under the batched workloads it is mostly queueing), and the relay's CPU (user +
system from /proc/PID/stat, all rounds together) per MB of messages and per 10^4 requests (the clients' own count of
the requests they sent). Before each path's workloads ``--probe`` 1 KiB produces are sent one at a time, each
awaited: their p50 and p99 less direct's are the latency each relay adds with nothing queued. Kroxylicious's CPU
leaves out its JVM's JIT compiler threads (C1, C2), which go on compiling for minutes after the warm-up (a
long-running proxy has paid that once; their seconds over the rounds are printed beside it); its garbage collector's
threads are counted. CPU per unit of work moves little with the machine's load; throughput and latency move with it,
so the load average is printed beside them. Verdicts: the issue's targets (the proxy's CPU per request and per MB at
or below Kroxylicious's, its throughput at or above it); exit status 1 while any is missed.

Usage: ``python bench/anchors_kroxylicious.py [--rounds 3] [--messages 100000] [--small 5000] [--group-seconds 8]``
(about 5 minutes; fetches Kroxylicious with Maven on first use).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench.anchors_common import (  # noqa: E402
    ProxyProcess,
    Verdicts,
    compiler_user_system_seconds,
    cpu_seconds,
    load,
    median,
    percentile,
)
from bench.common import wait_for_port  # noqa: E402
from bench.kroxylicious import KroxyliciousProcess  # noqa: E402
from bench.passthrough import PAYLOAD, create_topic, latencies  # noqa: E402
from bench.rdkafka_workloads import (  # noqa: E402
    Outcome,
    consume_batched,
    group_polling,
    produce_batched,
    produce_single,
)
from tests.harness import cluster_ports  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

PATHS = ("direct", "kroxylicious", "proxy")
KINDS = ("produce", "consume", "single", "group")
NEVER_BINDS = 10**12
QUOTAS = [
    {
        "entity": {"user": "<default>"},
        "producer_byte_rate": NEVER_BINDS,
        "consumer_byte_rate": NEVER_BINDS,
        "producer_ids_rate": 10**6,
    },
    {"entity": {"client-id": "<default>"}, "controller_mutation_rate": 10**6},
]
GROUP_PARTITIONS = 100
READS = 3  # the batched topic is read back this many times: one read of a fast path takes a fraction of a second


def run_path(path: str, bootstrap: str, direct: str, cpu, args, tag: str) -> tuple[dict[str, Outcome], list[float]]:
    """One pass of every workload on one path, and the probe's round trips; ``tag`` names its topics and groups."""
    marks = [time.monotonic()]
    topic, small = f"batched-{path}-{tag}", f"single-{path}-{tag}"
    create_topic(direct, topic)
    create_topic(direct, small, 1)
    probe = latencies(bootstrap, small, args.probe)
    marks.append(time.monotonic())
    out = {"produce": produce_batched(bootstrap, topic, args.messages, cpu)}
    out["consume"] = consume_batched(bootstrap, topic, args.messages, 4, READS, cpu)
    out["single"] = produce_single(bootstrap, small, args.small, cpu)
    marks.append(time.monotonic())
    group = f"g-{path}-{tag}"
    out["group"] = group_polling(
        bootstrap, f"group-{path}", group, args.consumers, GROUP_PARTITIONS, args.group_seconds, cpu
    )
    marks.append(time.monotonic())
    admin = AdminClient({"bootstrap.servers": direct})
    for future in admin.delete_topics([topic, small]).values():
        future.result(30)
    steps = " ".join(
        f"{name} {b - a:.0f} s" for name, a, b in zip(("probe", "batched+single", "group"), marks, marks[1:])
    )
    print(f"{tag} {path}: {steps}, load {load()}", file=sys.stderr)
    return out, probe


def compiler_seconds(pid: int) -> float:
    """CPU seconds of a JVM's JIT compiler threads (C1 and C2), which keep compiling for minutes after start-up."""
    user, system = compiler_user_system_seconds(pid)
    return user + system


def amount(kind: str, outcome: Outcome, args) -> float:
    """The workload's unit of throughput: MB of messages, one-message requests, or the group's requests."""
    if kind in ("produce", "consume"):
        return args.messages * len(PAYLOAD) / 1e6 * (READS if kind == "consume" else 1)
    return args.small if kind == "single" else outcome.requests


def weighted(windows, at: int) -> float:
    """Round trip in ms: the windows' p50 (at=1) or p99 (at=2), averaged weighted by their requests."""
    total = sum(w[0] for w in windows)
    return sum(w[0] * w[at] for w in windows) / total / 1000 if total else float("nan")


def report(results: dict[str, dict[str, list[Outcome]]], args, verdicts: Verdicts) -> None:
    units = {"produce": "MB/s", "consume": "MB/s", "single": "requests/s", "group": "requests/s"}
    for kind in KINDS:
        rates = {p: [amount(kind, o, args) / o.seconds for o in results[p][kind]] for p in PATHS}
        d = median(rates["direct"])
        print(f"  {kind}: throughput, direct {d:.0f} {units[kind]}")
        for p in PATHS[1:]:
            per_round = " ".join(f"{x / y:.2f}" for x, y in zip(rates[p], rates["direct"]))
            line = (
                f"    {p:12} {median(rates[p]):8.0f} {units[kind]} = {median(rates[p]) / d:.2f} x direct ({per_round})"
            )
            if p == "proxy":
                k = median(rates["kroxylicious"])
                line += f", {median(rates[p]) / k:.2f} x Kroxylicious"
            print(line)
        windows = {p: [w for o in results[p][kind] for w in o.windows] for p in PATHS}
        p50, p99 = weighted(windows["direct"], 1), weighted(windows["direct"], 2)
        line = f"    round trip p50 / p99: direct {p50:.2f} / {p99:.2f} ms"
        for p in PATHS[1:]:
            line += f"; {p} {weighted(windows[p], 1) - p50:+.2f} / {weighted(windows[p], 2) - p99:+.2f} ms"
        print(line)
        cpu, per_mb, per_req = {}, {}, {}
        for p in PATHS[1:]:
            cpu[p] = sum(o.cpu for o in results[p][kind])
            requests = sum(o.requests for o in results[p][kind])
            per_req[p] = cpu[p] * 1000 / requests * 1e4 if requests else float("nan")
            per_mb[p] = cpu[p] * 1000 / sum(amount(kind, o, args) for o in results[p][kind])
            mb = f"{per_mb[p]:.2f} ms per MB, " if kind in ("produce", "consume") else ""
            print(f"    CPU {p:12} {mb}{per_req[p]:.0f} ms per 10^4 requests ({cpu[p]:.2f} s, {requests} requests)")
        ratio = per_req["proxy"] / per_req["kroxylicious"]
        print(f"    proxy / Kroxylicious CPU per request: {ratio:.2f} x")
        if kind in ("produce", "consume"):
            verdicts.check(
                f"{kind}: the proxy's CPU per MB at or below Kroxylicious's",
                per_mb["proxy"] <= per_mb["kroxylicious"],
                f"{per_mb['proxy']:.2f} against {per_mb['kroxylicious']:.2f} ms per MB",
            )
            verdicts.check(
                f"{kind}: the proxy's throughput at or above Kroxylicious's",
                median(rates["proxy"]) >= median(rates["kroxylicious"]),
                f"{median(rates['proxy']) / median(rates['kroxylicious']):.2f} x",
            )
        else:
            verdicts.check(
                f"{kind}: the proxy's CPU per request at or below Kroxylicious's",
                ratio <= 1.0,
                f"{per_req['proxy']:.0f} against {per_req['kroxylicious']:.0f} ms per 10^4 requests ({ratio:.2f} x)",
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--group-seconds", type=float, default=8.0)
    parser.add_argument("--probe", type=int, default=300, help="awaited 1 KiB produces per round and path")
    args = parser.parse_args()
    loads = [load()]
    cluster = KafkaCluster(1, "anchors-krox").start()
    node = cluster.nodes[0]
    kroxylicious = proxy = None
    try:
        krox_port, _ = cluster_ports(4)
        kroxylicious = KroxyliciousProcess(krox_port, node.direct, Path(cluster.directory) / "kroxylicious").start()
        proxy_port, base = cluster_ports(4)
        proxy = ProxyProcess(proxy_port, node.direct, QUOTAS, broker_port_base=base).start()
        wait_for_port(base + node.node_id, 60)
        krox_pid = kroxylicious.proc.pid
        bootstraps = {
            "direct": node.direct,
            "kroxylicious": f"127.0.0.1:{krox_port}",
            "proxy": f"127.0.0.1:{proxy_port}",
        }
        cpus = {
            "direct": lambda: 0.0,
            "kroxylicious": lambda: cpu_seconds(krox_pid) - compiler_seconds(krox_pid),
            "proxy": proxy.cpu,
        }
        for p in PATHS:
            create_topic(node.direct, f"group-{p}", GROUP_PARTITIONS)
        warm = argparse.Namespace(**{**vars(args), "group_seconds": 3.0, "probe": 100})
        for p in PATHS:
            run_path(p, bootstraps[p], node.direct, cpus[p], warm, "warm")
        loads.append(load())
        results: dict[str, dict[str, list[Outcome]]] = {p: {k: [] for k in KINDS} for p in PATHS}
        probes: dict[str, list[float]] = {p: [] for p in PATHS}
        jit = -compiler_seconds(krox_pid)
        for r in range(args.rounds):
            for p in PATHS[r % 3 :] + PATHS[: r % 3]:
                outcomes, probe = run_path(p, bootstraps[p], node.direct, cpus[p], args, str(r))
                for kind, outcome in outcomes.items():
                    results[p][kind].append(outcome)
                probes[p] += probe
            loads.append(load())
        jit += compiler_seconds(krox_pid)
    finally:
        for relay in (proxy, kroxylicious):
            if relay is not None:
                relay.stop()
        cluster.stop()
    print(
        f"Apache Kafka 4.4.0 (one broker), Kroxylicious 0.12.0, confluent-kafka {confluent_kafka.version()} "
        f"(librdkafka {confluent_kafka.libversion()[0]}); {args.rounds} rounds of {args.messages} x 1 KiB batched, "
        f"{args.small} one-message Produce requests, a group of {args.consumers} for {args.group_seconds:.0f} s; "
        f"load {' '.join(loads)}"
    )
    d50, d99 = percentile(probes["direct"], 0.5), percentile(probes["direct"], 0.99)
    line = f"  probe, {len(probes['direct'])} awaited 1 KiB produces per path: direct p50 {d50:.2f} / p99 {d99:.2f} ms"
    for p in PATHS[1:]:
        line += f"; {p} {percentile(probes[p], 0.5) - d50:+.2f} / {percentile(probes[p], 0.99) - d99:+.2f} ms"
    print(line)
    krox_cpu = sum(o.cpu for kind in KINDS for o in results["kroxylicious"][kind])
    print(
        f"  Kroxylicious's CPU below leaves out its JIT compiler threads, still compiling after the warm-up: "
        f"{jit:.2f} s over the rounds, beside the {krox_cpu:.2f} s counted in its workloads"
    )
    verdicts = Verdicts()
    report(results, args, verdicts)
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
