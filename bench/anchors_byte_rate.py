"""Byte-rate quotas beside Kafka's own: the same clients, the same quota, the same entity, in one run.

One Apache Kafka 4.4.0 broker (tests/kafka_cluster.py). Three paths run side by side, at the same time, so whatever
else the machine runs weighs on all three alike:

- ``kafka``: the client connects to the broker directly; its ``producer_byte_rate`` / ``consumer_byte_rate`` is set
  in Kafka itself (kafka-configs.sh --bootstrap-server <broker> --entity-type clients);
- ``proxy-off``: through a sidecar proxy (its own process) with the same quota on the same entity in its YAML,
  ``quota.smoothing: off`` (Kafka's sampled rate); the broker has no quota for it;
- ``proxy-on``: the same through a second proxy with ``quota.smoothing: on``.

The quota is ``--quota`` (4 MiB/s) for every client but kafka-python, 1 MiB/s (``--quota-of``): flat out beside two
others it produced only 3.0-3.4 MiB/s on two shared cores (0.74-0.81 x a 4 MiB/s quota), which measures the client,
not the quota. Both proxies and Kafka use Kafka's default windows (11 x 1 s). For each client (librdkafka through confluent-kafka,
kafka-python, aiokafka, Kafka's Java ProducerPerformance / ConsumerPerformance), each at its default settings,
flat out with 1000-byte values: a produce phase (a 3-partition topic per path), then a consume phase (each path's
consumer reads a 1-partition topic filled beforehand). Per path it reports, from the client's own counts (value
bytes acknowledged / received):

- achieved / quota from the end of the first window span (11 s: a fresh quota admits about quota x 10 s at first,
  in Kafka and in the proxy) to the end of the run: the slope of the client's cumulative bytes over those seconds
  (a least-squares fit: under Kafka's stop-and-go a burst of 10 x quota every 11 s or so landing just inside or just
  outside the end of a 60 s run moves the plain mean by 0.2, the slope by about 0.01); the plain mean is printed
  beside it;
- the share of those seconds within 0.5-1.5 x the quota;
- the longest pause between acknowledgements (producers) or between records received (consumers) over the whole
  run (for the Java tools, the longest gap between their 1 s reports: a bound, 1 s coarse);
- produce latency p50/p99 of an unthrottled confluent-kafka producer on the same path (paced, 50 x 1000 B/s,
  default settings), and the proxies' CPU seconds per GB and per 10^5 requests.

Targets: with smoothing off, accuracy within 0.03 of Kafka's (the proxy's |achieved / quota - 1| at most Kafka's +
0.03; the printout also says whether the two rates are the same within 0.03); with smoothing on, a larger share of seconds
in band than Kafka's wherever a second holds several requests (the client's request, at most its batch size x
partitions or its fetch size, at most a quarter of the quota; else the figure is printed and not claimed).

The clients' producers and consumers, and the probe, are ``bench/anchors_byte_rate_clients.py``; this file runs the
phases and compares the paths.

Usage: ``python bench/anchors_byte_rate.py [--duration 60] [--quota 4194304] [--quota-of kafka-python=1048576]
[--clients librdkafka,...] [--verbose]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_byte_rate_clients import (  # noqa: E402
    CLIENTS,
    FETCH_RESPONSE,
    PARTITIONS,
    PRODUCE_REQUEST,
    VALUE,
    Series,
    driver,
    probe,
    threaded,
)
from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load, percentile  # noqa: E402
from bench.common import fill  # noqa: E402
from tests.kafka_cluster import ExtraListener, KafkaCluster  # noqa: E402

PATHS = ("kafka", "proxy-off", "proxy-on")
SPAN_S = 11  # Kafka's default quota.window.num x quota.window.size.seconds


def client_id(path: str, kind: str) -> str:
    return f"anchor-{path}-{kind}"


# -- figures ------------------------------------------------------------------------------------------------------


def slope(ys: list[float]) -> float:
    """The least-squares slope of ``ys`` against 0, 1, 2, ...: a staircase's rate, whatever its phase (the mean of
    the seconds moves by a whole burst as one lands just inside or outside the end of the run)."""
    n = len(ys)
    if n < 2:
        return float("nan")
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(ys)) / sum((x - mean_x) ** 2 for x in range(n))


def steady_rate(seconds: list[int], quota: float) -> tuple[float, float]:
    """(achieved, mean) / ``quota`` of the bytes per second after the first window span: the slope of their
    cumulative sum, and their plain mean."""
    steady = seconds[SPAN_S:]
    cumulative, total = [], 0
    for x in steady:
        total += x
        cumulative.append(total)
    return slope(cumulative) / quota, sum(steady) / len(steady) / quota


def figures(series: Series, t0: float, duration: int, quota: float) -> dict:
    """Seconds counted from the client's first acknowledgement or record (a JVM takes seconds to start), to the end
    of the phase."""
    start = min((t for t, _ in series.events), default=t0)
    length = max(SPAN_S + 1, int(t0 + duration - start))
    seconds = [0] * length
    for t, n in series.events:
        i = int(t - start)
        if 0 <= i < length:
            seconds[i] += n
    steady = seconds[SPAN_S:]
    times = sorted(t for t, _ in series.events if t < t0 + duration)
    gaps = [b - a for a, b in zip(times, times[1:])]
    achieved, mean = steady_rate(seconds, quota)
    return {
        "mean": mean,
        "achieved": achieved,
        "in_band": sum(0.5 <= s / quota <= 1.5 for s in steady) / len(steady),
        "pause_s": max(gaps, default=float("nan")),
        "seconds": [round(s / quota, 2) for s in seconds],
        "bytes": sum(seconds),
        "error": series.error,
    }


def run_phase(direction, kind, cluster, bootstraps, proxies, topics, args):
    run = driver(direction, kind, cluster)
    stop = threading.Event()
    series = {path: Series() for path in PATHS}
    latencies = {path: [] for path in PATHS}
    cpu0 = {name: (p.cpu(), p.metric("requests_total")) for name, p in proxies.items()}
    load_before = load()
    t0 = time.monotonic()
    threads = [threaded(probe, bootstraps[path], topics[path]["probe"], stop, latencies[path]) for path in PATHS]
    threads += [
        threaded(run, bootstraps[path], topics[path][direction], client_id(path, kind), stop, series[path])
        for path in PATHS
    ]
    time.sleep(max(0.0, t0 + args.duration - time.monotonic()))
    stop.set()
    cpu1 = {name: (p.cpu(), p.metric("requests_total")) for name, p in proxies.items()}
    for thread in threads:
        thread.join(30)
    out = {path: figures(series[path], t0, args.duration, args.quotas[kind]) for path in PATHS}
    for path in PATHS:
        out[path]["p50"] = percentile(latencies[path], 0.5)
        out[path]["p99"] = percentile(latencies[path], 0.99)
        if path in proxies:
            cpu = cpu1[path][0] - cpu0[path][0]
            requests = cpu1[path][1] - cpu0[path][1]
            gb = (out[path]["bytes"] + 50 * len(VALUE) * args.duration) / 1e9
            out[path]["cpu_per_gb"] = cpu / gb if gb else float("nan")
            out[path]["cpu_per_1e5_req"] = cpu / requests * 1e5 if requests else float("nan")
    return out, f"{load_before}-{load()}"


def report(direction, kind, out, loads, args, verdicts):
    request = (PRODUCE_REQUEST if direction == "produce" else FETCH_RESPONSE)[kind]
    quota = args.quotas[kind]
    print(
        f"\n{kind} {direction}, quota {quota} B/s, {args.duration} s, load {loads} "
        f"(largest request {request} B = {request / quota:.2f} x quota)"
    )
    print(
        f"  {'path':10} {'mean':>6} {'achieved/quota':>14} {'in 0.5-1.5x':>11} {'longest pause':>13} "
        f"{'unthrottled p50/p99 ms':>22} {'proxy CPU s/GB':>14} {'s/1e5 req':>9}"
    )
    for path in PATHS:
        f = out[path]
        print(
            f"  {path:10} {f['mean']:6.3f} {f['achieved']:14.3f} {f['in_band']:11.2f} {f['pause_s']:12.2f}s "
            f"{f['p50']:10.1f} / {f['p99']:9.1f} {f.get('cpu_per_gb', float('nan')):14.1f} "
            f"{f.get('cpu_per_1e5_req', float('nan')):9.1f}"
        )
        if f["error"] is not None:
            print(f"    {path} client failed: {f['error']!r}")
    if args.verbose:
        for path in PATHS:
            print(f"    {path} per second / quota: {out[path]['seconds']}")
    kafka, off, on = out["kafka"], out["proxy-off"], out["proxy-on"]
    name = f"{kind} {direction}"
    # Accuracy is the distance from the quota: the proxy's may exceed Kafka's by at most 0.03 (closer is better).
    verdicts.check(
        f"{name}: smoothing off, accuracy within 0.03 of Kafka's",
        abs(off["achieved"] - 1) <= abs(kafka["achieved"] - 1) + 0.03,
        f"proxy {off['achieved']:.3f} vs Kafka {kafka['achieved']:.3f} (same rate within 0.03: "
        f"{'yes' if abs(off['achieved'] - kafka['achieved']) <= 0.03 else 'no'})",
    )
    if request <= quota / 4:
        verdicts.check(
            f"{name}: smoothing on, more seconds in band than Kafka",
            on["in_band"] > kafka["in_band"],
            f"proxy {on['in_band']:.2f} vs Kafka {kafka['in_band']:.2f}",
        )
    else:
        print(
            f"  (not claimed: {request} B requests are more than a quarter of the quota, a second holds at most "
            f"a few; smoothing on {on['in_band']:.2f} vs Kafka {kafka['in_band']:.2f})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per phase (default 60)")
    parser.add_argument("--quota", type=int, default=4 * 1024 * 1024, help="bytes/s, produce and fetch")
    parser.add_argument(
        "--quota-of",
        action="append",
        default=[],
        metavar="CLIENT=BYTES",
        help="another quota for one client (default: kafka-python=1048576, which cannot produce "
        "4 MiB/s flat out beside two others on two shared cores)",
    )
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--directions", default="produce,consume")
    parser.add_argument("--verbose", action="store_true", help="print every second's rate")
    args = parser.parse_args()
    if args.duration <= SPAN_S + 1:
        parser.error(f"--duration must be more than {SPAN_S + 1} s (the first window span is left out)")
    kinds = args.clients.split(",")
    args.quotas = dict.fromkeys(CLIENTS, args.quota) | {"kafka-python": min(args.quota, 1024 * 1024)}
    for item in args.quota_of:
        name, _, value = item.partition("=")
        if name not in CLIENTS or not value.isdigit() or int(value) <= 0:
            parser.error(f"--quota-of: expected CLIENT=BYTES with CLIENT one of {', '.join(CLIENTS)}, got {item!r}")
        args.quotas[name] = int(value)
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors", extra_listeners={"SMOOTH": ExtraListener("PLAINTEXT")}).start()
    node = cluster.nodes[0]
    quotas = [
        {
            "entity": {"client-id": client_id(path, kind)},
            "producer_byte_rate": args.quotas[kind],
            "consumer_byte_rate": args.quotas[kind],
        }
        for path in ("proxy-off", "proxy-on")
        for kind in CLIENTS
    ]
    proxies = {}
    try:
        proxies["proxy-off"] = ProxyProcess(
            node.proxy_port, f"127.0.0.1:{node.client_port}", quotas, {"quota.smoothing": "off"}
        ).start()
        proxies["proxy-on"] = ProxyProcess(
            node.extra_advertised["SMOOTH"],
            f"127.0.0.1:{node.extra_ports['SMOOTH']}",
            quotas,
            {"quota.smoothing": "on"},
        ).start()
        for kind in CLIENTS:
            kafka_client_quota(
                cluster,
                client_id("kafka", kind),
                producer_byte_rate=args.quotas[kind],
                consumer_byte_rate=args.quotas[kind],
            )
        bootstraps = {
            "kafka": node.direct,
            "proxy-off": f"127.0.0.1:{node.proxy_port}",
            "proxy-on": f"127.0.0.1:{node.extra_advertised['SMOOTH']}",
        }
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.direct})
        topics, new = {}, []
        for path in PATHS:
            topics[path] = {
                "produce": f"anchor-{path}-produce",
                "probe": f"anchor-{path}-probe",
                "consume": "anchor-consume",
            }
            new += [NewTopic(f"anchor-{path}-produce", PARTITIONS, 1), NewTopic(f"anchor-{path}-probe", 1, 1)]
        new.append(NewTopic("anchor-consume", 1, 1))
        for done in admin.create_topics(new).values():
            done.result(60)
        print(
            f"Apache Kafka 4.4.0, one node; quotas per client id (B/s, produce and fetch): {args.quotas}; load {load()}"
        )
        if "consume" in args.directions:
            need = int(max(args.quotas[kind] for kind in kinds) * (args.duration + SPAN_S) * 1.2)
            print(f"filling anchor-consume with {need / 1e6:.0f} MB for the consumers ...", flush=True)
            fill(node.direct, "anchor-consume", need, VALUE, 1_000_000)
        for direction in args.directions.split(","):
            for kind in kinds:
                out, loads = run_phase(direction, kind, cluster, bootstraps, proxies, topics, args)
                report(direction, kind, out, loads, args, verdicts)
    finally:
        for proxy in proxies.values():
            proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
