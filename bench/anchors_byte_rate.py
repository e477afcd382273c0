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

Usage: ``python bench/anchors_byte_rate.py [--duration 60] [--quota 4194304] [--quota-of kafka-python=1048576]
[--clients librdkafka,...] [--verbose]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load, percentile  # noqa: E402
from bench.common import fill  # noqa: E402
from tests.kafka_cluster import CONSUMER_PERF, PRODUCER_PERF, ExtraListener, KafkaCluster  # noqa: E402

VALUE = b"v" * 1000
PATHS = ("kafka", "proxy-off", "proxy-on")
CLIENTS = ("librdkafka", "kafka-python", "aiokafka", "java")
SPAN_S = 11  # Kafka's default quota.window.num x quota.window.size.seconds
PARTITIONS = 3
# The largest request each client sends flat out at its defaults: produce (batch size x partitions), fetch (one
# partition's max fetch size; the consume topic has one partition).
PRODUCE_REQUEST = {"librdkafka": 1_000_000, "kafka-python": 16384 * PARTITIONS, "aiokafka": 16384 * PARTITIONS,
                   "java": 16384 * PARTITIONS}
FETCH_RESPONSE = {"librdkafka": 1_048_576, "kafka-python": 1_048_576, "aiokafka": 1_048_576, "java": 1_048_576}


class Series:
    """(monotonic time, value bytes) of each acknowledgement or receipt, appended from any thread."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.error: BaseException | None = None


def client_id(path: str, kind: str) -> str:
    return f"anchor-{path}-{kind}"


# -- producers, each at its library's default settings ------------------------------------------------------------

def librdkafka_produce(bootstrap, topic, cid, stop, series):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid})
    events = series.events

    def acked(err, msg):
        if err is None:
            events.append((time.monotonic(), len(msg.value())))

    while not stop.is_set():
        try:
            p.produce(topic, VALUE, on_delivery=acked)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.purge()
    p.flush(5)


def kafka_python_produce(bootstrap, topic, cid, stop, series):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid)
    room = threading.Semaphore(8192)  # kafka-python 3 has no buffer.memory: the application bounds what it queues
    events = series.events

    def acked(_):
        events.append((time.monotonic(), len(VALUE)))
        room.release()

    while not stop.is_set():
        if room.acquire(timeout=0.2):
            p.send(topic, VALUE).add_callback(acked).add_errback(lambda _: room.release())
    p.close(5)


def aiokafka_produce(bootstrap, topic, cid, stop, series):
    from aiokafka import AIOKafkaProducer

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=cid)
        await p.start()
        events = series.events

        def acked(fut):
            if not fut.cancelled() and fut.exception() is None:
                events.append((time.monotonic(), len(VALUE)))
        try:
            while not stop.is_set():
                (await p.send(topic, VALUE)).add_done_callback(acked)  # send() waits while its batches are full
        finally:
            await asyncio.wait_for(p.stop(), 10)

    asyncio.run(main())


def java_lines(command, stop, on_line):
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True)

    def stopper():
        stop.wait()
        proc.terminate()
    threading.Thread(target=stopper, daemon=True).start()
    for line in proc.stdout:
        on_line(time.monotonic(), line)
    proc.wait()


def java_produce(cluster):
    sent = re.compile(r"^(\d+) records sent, ")

    def run(bootstrap, topic, cid, stop, series):
        command = cluster.java(PRODUCER_PERF, "--topic", topic, "--num-records", str(10**9), "--record-size",
                               str(len(VALUE)), "--throughput", "-1", "--reporting-interval", "1000",
                               "--command-property", f"bootstrap.servers={bootstrap}", f"client.id={cid}")

        def on_line(t, line):
            found = sent.match(line)
            if found:  # one line per reporting interval: the records acknowledged in it
                series.events.append((t, int(found.group(1)) * len(VALUE)))
        java_lines(command, stop, on_line)
    return run


# -- consumers, each at its library's default settings ------------------------------------------------------------

def librdkafka_consume(bootstrap, topic, cid, stop, series):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "client.id": cid, "group.id": cid, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    while not stop.is_set():
        for m in c.consume(1000, 0.2):
            if not m.error():
                series.events.append((time.monotonic(), len(m.value())))
    c.close()


def kafka_python_consume(bootstrap, topic, cid, stop, series):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id=cid, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    while not stop.is_set():
        for records in c.poll(200).values():
            t = time.monotonic()
            series.events.extend((t, len(r.value)) for r in records)
    c.close()


def aiokafka_consume(bootstrap, topic, cid, stop, series):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=cid, enable_auto_commit=False)
        await c.start()
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        try:
            while not stop.is_set():
                for records in (await c.getmany(timeout_ms=200)).values():
                    t = time.monotonic()
                    series.events.extend((t, len(r.value)) for r in records)
        finally:
            await c.stop()

    asyncio.run(main())


def java_consume(cluster):
    def run(bootstrap, topic, cid, stop, series):
        command = cluster.java(CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
                               str(10**9), "--timeout", "600000", "--reporting-interval", "1000",
                               "--show-detailed-stats", "--hide-header", "--group", cid,
                               "--command-property", f"client.id={cid}")
        last = [0]

        def on_line(t, line):
            fields = [f.strip() for f in line.split(",")]
            if len(fields) >= 6 and fields[4].isdigit():  # time, thread, MB, MB/s, records so far, ...
                total = int(fields[4])
                series.events.append((t, (total - last[0]) * len(VALUE)))
                last[0] = total
        java_lines(command, stop, on_line)
    return run


def probe(bootstrap, topic, stop, latencies_ms):
    """An unthrottled confluent-kafka producer (default settings) beside the limited one: 50 records/s of 1000 B,
    each delivery's latency (librdkafka's own, produce() to acknowledgement)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "anchor-unthrottled"})

    def acked(err, msg):
        if err is None:
            latencies_ms.append(msg.latency() * 1000)

    next_t = time.monotonic()
    while not stop.is_set():
        p.produce(topic, VALUE, on_delivery=acked)
        next_t += 0.02
        p.poll(max(0.0, next_t - time.monotonic()))
    p.flush(10)


def threaded(target, *args) -> threading.Thread:
    series = args[-1]

    def run():
        try:
            target(*args)
        except BaseException as error:  # reported with the figures
            if isinstance(series, Series):
                series.error = error
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# -- figures ------------------------------------------------------------------------------------------------------

def slope(ys: list[float]) -> float:
    """The least-squares slope of ``ys`` against 0, 1, 2, ...: a staircase's rate, whatever its phase (the mean of
    the seconds moves by a whole burst as one lands just inside or outside the end of the run)."""
    n = len(ys)
    if n < 2:
        return float("nan")
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(ys)) / sum((x - mean_x) ** 2 for x in range(n))


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
    cumulative, total = [], sum(seconds[:SPAN_S])
    for x in steady:
        total += x
        cumulative.append(total)
    return {"mean": sum(steady) / len(steady) / quota, "achieved": slope(cumulative) / quota,
            "in_band": sum(0.5 <= s / quota <= 1.5 for s in steady) / len(steady),
            "pause_s": max(gaps, default=float("nan")),
            "seconds": [round(s / quota, 2) for s in seconds],
            "bytes": sum(seconds), "error": series.error}


def run_phase(direction, kind, cluster, bootstraps, proxies, topics, args):
    producers = {"librdkafka": librdkafka_produce, "kafka-python": kafka_python_produce,
                 "aiokafka": aiokafka_produce, "java": java_produce(cluster)}
    consumers = {"librdkafka": librdkafka_consume, "kafka-python": kafka_python_consume,
                 "aiokafka": aiokafka_consume, "java": java_consume(cluster)}
    run = (producers if direction == "produce" else consumers)[kind]
    stop = threading.Event()
    series = {path: Series() for path in PATHS}
    latencies = {path: [] for path in PATHS}
    cpu0 = {name: (p.cpu(), p.metric("requests_total")) for name, p in proxies.items()}
    load_before = load()
    t0 = time.monotonic()
    threads = [threaded(probe, bootstraps[path], topics[path]["probe"], stop, latencies[path]) for path in PATHS]
    threads += [threaded(run, bootstraps[path], topics[path][direction], client_id(path, kind), stop, series[path])
                for path in PATHS]
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
    print(f"\n{kind} {direction}, quota {quota} B/s, {args.duration} s, load {loads} "
          f"(largest request {request} B = {request / quota:.2f} x quota)")
    print(f"  {'path':10} {'mean':>6} {'achieved/quota':>14} {'in 0.5-1.5x':>11} {'longest pause':>13} "
          f"{'unthrottled p50/p99 ms':>22} {'proxy CPU s/GB':>14} {'s/1e5 req':>9}")
    for path in PATHS:
        f = out[path]
        print(f"  {path:10} {f['mean']:6.3f} {f['achieved']:14.3f} {f['in_band']:11.2f} {f['pause_s']:12.2f}s "
              f"{f['p50']:10.1f} / {f['p99']:9.1f} {f.get('cpu_per_gb', float('nan')):14.1f} "
              f"{f.get('cpu_per_1e5_req', float('nan')):9.1f}")
        if f["error"] is not None:
            print(f"    {path} client failed: {f['error']!r}")
    if args.verbose:
        for path in PATHS:
            print(f"    {path} per second / quota: {out[path]['seconds']}")
    kafka, off, on = out["kafka"], out["proxy-off"], out["proxy-on"]
    name = f"{kind} {direction}"
    # Accuracy is the distance from the quota: the proxy's may exceed Kafka's by at most 0.03 (closer is better).
    verdicts.check(f"{name}: smoothing off, accuracy within 0.03 of Kafka's",
                   abs(off["achieved"] - 1) <= abs(kafka["achieved"] - 1) + 0.03,
                   f"proxy {off['achieved']:.3f} vs Kafka {kafka['achieved']:.3f} (same rate within 0.03: "
                   f"{'yes' if abs(off['achieved'] - kafka['achieved']) <= 0.03 else 'no'})")
    if request <= quota / 4:
        verdicts.check(f"{name}: smoothing on, more seconds in band than Kafka", on["in_band"] > kafka["in_band"],
                       f"proxy {on['in_band']:.2f} vs Kafka {kafka['in_band']:.2f}")
    else:
        print(f"  (not claimed: {request} B requests are more than a quarter of the quota, a second holds at most "
              f"a few; smoothing on {on['in_band']:.2f} vs Kafka {kafka['in_band']:.2f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per phase (default 60)")
    parser.add_argument("--quota", type=int, default=4 * 1024 * 1024, help="bytes/s, produce and fetch")
    parser.add_argument("--quota-of", action="append", default=[], metavar="CLIENT=BYTES",
                        help="another quota for one client (default: kafka-python=1048576, which cannot produce "
                             "4 MiB/s flat out beside two others on two shared cores)")
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
    quotas = [{"entity": {"client-id": client_id(path, kind)}, "producer_byte_rate": args.quotas[kind],
               "consumer_byte_rate": args.quotas[kind]} for path in ("proxy-off", "proxy-on") for kind in CLIENTS]
    proxies = {}
    try:
        proxies["proxy-off"] = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}", quotas,
                                            {"quota.smoothing": "off"}).start()
        proxies["proxy-on"] = ProxyProcess(node.extra_advertised["SMOOTH"], f"127.0.0.1:{node.extra_ports['SMOOTH']}",
                                           quotas, {"quota.smoothing": "on"}).start()
        for kind in CLIENTS:
            kafka_client_quota(cluster, client_id("kafka", kind), producer_byte_rate=args.quotas[kind],
                               consumer_byte_rate=args.quotas[kind])
        bootstraps = {"kafka": node.direct, "proxy-off": f"127.0.0.1:{node.proxy_port}",
                      "proxy-on": f"127.0.0.1:{node.extra_advertised['SMOOTH']}"}
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.direct})
        topics, new = {}, []
        for path in PATHS:
            topics[path] = {"produce": f"anchor-{path}-produce", "probe": f"anchor-{path}-probe",
                            "consume": "anchor-consume"}
            new += [NewTopic(f"anchor-{path}-produce", PARTITIONS, 1), NewTopic(f"anchor-{path}-probe", 1, 1)]
        new.append(NewTopic("anchor-consume", 1, 1))
        for done in admin.create_topics(new).values():
            done.result(60)
        print(f"Apache Kafka 4.4.0, one node; quotas per client id (B/s, produce and fetch): {args.quotas}; "
              f"load {load()}")
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
