"""Volume usage beside Strimzi's kafka-quotas-plugin: the same disk, the same limits, the same producers.

Two one-node Apache Kafka 4.4.0 clusters run side by side, each with its log dir on its own bounded filesystem: a
tmpfs of ``--disk-mib`` mounted over the log dir in a user namespace the broker runs in (``unshare -Urm``: no root
needed), so the disk really fills and DescribeLogDirs reports its true size.

- ``strimzi``: io.strimzi:kafka-quotas-plugin 0.3.1 (Maven Central, fetched once into the cache beside Kafka) is the
  broker's ``client.quota.callback.class`` (``io.strimzi.kafka.quotas.StaticQuotaCallback``), checking the log dirs
  with DescribeLogDirs every ``--interval`` s, produce stopped when free space <= the hard limit
  (``storage.per.volume.limit.min.available.ratio``); 0.3.x has no soft limit (nothing between open and stopped).
- ``proxy``: the plain broker behind the proxy (its own process), ``volume_usage`` with ``source:
  describe_log_dirs`` every ``--interval`` s, the same hard limit and a soft limit (``--soft-free``) above it,
  ``produce_base_rate`` ``--base-rate`` scaled between them.

On each, a librdkafka producer (confluent-kafka, default settings: ``acks=all``, 1 MB batches) and Kafka's Java
ProducerPerformance write 1000-byte values flat out to a 1-partition topic each, for ``--duration`` s. The disk is
sampled every 0.5 s (statvfs of the log dir, seen through the broker's own mount namespace). Reported per cluster:
when the disk crossed the soft and the hard limit, when each producer was slowed (the first of 3 s running each
below half its rate before the soft limit) and stopped (its first 3 s without an acknowledgement), and how much was
written past the hard limit (the disk's largest use past the hard limit's threshold; and what each producer had
acknowledged since the hard limit was crossed). Targets: the proxy slows every producer from the soft limit, and
writes no more past the hard limit than Strimzi's plugin does.

Usage: ``python bench/anchors_volume.py [--duration 120] [--disk-mib 2048] [--hard-free 30] [--soft-free 50]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_byte_rate_clients import Series, java_produce, librdkafka_produce, threaded  # noqa: E402
from bench.anchors_common import PluginCluster, ProxyProcess, Verdicts, load  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import fetch_kafka  # noqa: E402

STRIMZI = ("io.strimzi", "kafka-quotas-plugin", "0.3.1")
PRODUCERS = ("librdkafka", "java")


def bounded_disk(mib: int):
    """A command wrapper: the broker runs in a user and mount namespace with a ``mib`` MiB tmpfs over its log dir
    (what StorageTool wrote there before is copied onto it)."""
    if shutil.which("unshare") is None:
        raise SystemExit("unshare (util-linux) is needed for the bounded log dir")

    def wrap(command):
        data = command[command.index("kafka.Kafka") + 1].rsplit("/", 1)[0] + "/data"
        script = (
            'd="$0"; t=$(mktemp -d); cp -a "$d"/. "$t"/ && mount -t tmpfs -o size=%dm tmpfs "$d" && '
            'cp -a "$t"/. "$d"/ && rm -rf "$t" && exec "$@"' % mib
        )
        return ["unshare", "-Urm", "sh", "-c", script, data, *command]

    return wrap


def disk_used(cluster) -> tuple[int, int]:
    """(used, capacity) bytes of the node's log dir, through its own mount namespace."""
    node = cluster.nodes[0]
    st = os.statvfs(f"/proc/{node.proc.pid}/root{node.data_dir}")
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize


def first(seconds, predicate, start=0):
    return next((i for i in range(start, len(seconds)) if predicate(i)), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=120)
    parser.add_argument("--disk-mib", type=int, default=2048)
    parser.add_argument("--hard-free", type=float, default=30, help="hard limit: %% free")
    parser.add_argument("--soft-free", type=float, default=50, help="the proxy's soft limit: %% free")
    parser.add_argument("--interval", type=int, default=5, help="seconds between DescribeLogDirs checks")
    parser.add_argument("--base-rate", type=int, default=4 * 1024 * 1024, help="the proxy's produce_base_rate")
    args = parser.parse_args()
    verdicts = Verdicts()
    plugin = fetch_kafka.fetch_jar(*STRIMZI) / f"{STRIMZI[1]}-{STRIMZI[2]}.jar"
    wrap = bounded_disk(args.disk_mib)
    strimzi = PluginCluster(1, "anchors-strimzi", classpath=[plugin], wrapper=wrap)
    strimzi.properties.update(
        {
            "client.quota.callback.class": "io.strimzi.kafka.quotas.StaticQuotaCallback",
            "client.quota.callback.static.kafka.admin.bootstrap.servers": strimzi.nodes[0].direct,
            "client.quota.callback.static.storage.per.volume.limit.min.available.ratio": str(args.hard_free / 100),
            "client.quota.callback.static.storage.check-interval": str(args.interval),
        }
    )
    plain = PluginCluster(1, "anchors-volume", wrapper=wrap)
    clusters = {"strimzi": strimzi, "proxy": plain}
    proxy = None
    try:
        for cluster in clusters.values():
            cluster.start()
        node = plain.nodes[0]
        proxy = ProxyProcess(
            node.proxy_port,
            f"127.0.0.1:{node.client_port}",
            extra={
                "volume_usage": {
                    "source": "describe_log_dirs",
                    "freshness_seconds": 4 * args.interval,
                    "produce_base_rate": args.base_rate,
                    "describe_log_dirs": {
                        "interval_seconds": args.interval,
                        "soft_limit": {"type": "MinFreePercentage", "level": args.soft_free},
                        "hard_limit": {"type": "MinFreePercentage", "level": args.hard_free},
                    },
                }
            },
        ).start()
        bootstraps = {"strimzi": strimzi.nodes[0].direct, "proxy": f"127.0.0.1:{node.proxy_port}"}
        from confluent_kafka.admin import AdminClient, NewTopic

        for cluster in clusters.values():
            admin = AdminClient({"bootstrap.servers": cluster.nodes[0].direct})
            for done in admin.create_topics([NewTopic(f"fill-{kind}", 1, 1) for kind in PRODUCERS]).values():
                done.result(60)
        print(
            f"Apache Kafka 4.4.0, two one-node clusters, each log dir a {args.disk_mib} MiB tmpfs; hard limit "
            f"{args.hard_free:g} % free (both), soft {args.soft_free:g} % free (proxy; Strimzi 0.3.1 has none); "
            f"checks every {args.interval} s; load {load()}",
            flush=True,
        )
        stop = threading.Event()
        series = {(name, kind): Series() for name in clusters for kind in PRODUCERS}
        disk = {name: [] for name in clusters}
        t0 = time.monotonic()

        def sample():
            while not stop.is_set():
                for name, cluster in clusters.items():
                    try:
                        disk[name].append((time.monotonic() - t0, *disk_used(cluster)))
                    except (OSError, AttributeError):
                        pass
                stop.wait(0.5)

        threads = [threading.Thread(target=sample, daemon=True)]
        threads[0].start()
        producers = {"librdkafka": librdkafka_produce, "java": java_produce(plain)}
        for (name, kind), s in series.items():
            threads.append(threaded(producers[kind], bootstraps[name], f"fill-{kind}", f"fill-{name}-{kind}", stop, s))
        time.sleep(args.duration)
        stop.set()
        for thread in threads:
            thread.join(30)
        loads = load()
        for name in clusters:
            samples = disk[name]
            capacity = samples[-1][2]
            soft_at = capacity * (1 - args.soft_free / 100)
            hard_at = capacity * (1 - args.hard_free / 100)
            crossed_soft = next((t for t, used, _ in samples if used >= soft_at), None)
            crossed_hard = next((t for t, used, _ in samples if used >= hard_at), None)
            peak = max(used for _, used, _ in samples)
            past = max(0, peak - hard_at)
            node = clusters[name].nodes[0]
            failed = "Error while appending records" in node.log_file.read_text(errors="replace")
            state = (
                "its log dir FAILED (disk full), the broker stopped serving it"
                if failed
                else "the broker served to the end"
                if node.proc.poll() is None
                else "the broker EXITED"
            )
            print(
                f"\n{name} ({state}): disk {capacity / 2**20:.0f} MiB, soft {soft_at / 2**20:.0f} MiB used, hard "
                f"{hard_at / 2**20:.0f} MiB used; crossed soft at {fmt(crossed_soft)}, hard at {fmt(crossed_hard)}; "
                f"peak {peak / 2**20:.0f} MiB = {past / 2**20:.1f} MiB written past the hard limit; load {loads}"
            )
            for kind in PRODUCERS:
                s = series[(name, kind)]
                seconds = [0] * args.duration
                for t, n in s.events:
                    if 0 <= int(t - t0) < args.duration:
                        seconds[int(t - t0)] += n
                began = first(seconds, lambda i: seconds[i] > 0) or 0  # a JVM takes seconds to start
                soft_s = int(crossed_soft) if crossed_soft is not None else len(seconds)
                before = [x for x in seconds[began + 1 : soft_s]] or seconds[began : began + 1]
                open_rate = sum(before) / len(before)
                throttled = first(
                    seconds, lambda i: i + 3 <= len(seconds) and max(seconds[i : i + 3]) < open_rate / 2, began + 1
                )
                paused = first(seconds, lambda i: sum(seconds[i : i + 3]) == 0 and i + 3 <= len(seconds), began + 1)
                after_hard = sum(n for t, n in s.events if crossed_hard is not None and t - t0 >= crossed_hard)
                after_soft = sum(n for t, n in s.events if crossed_soft is not None and t - t0 >= crossed_soft)
                print(
                    f"  {kind:10} open {open_rate / 2**20:5.1f} MiB/s; below half of it (3 s running) from "
                    f"{fmt(throttled)}, 3 s without an ack from {fmt(paused)}; acknowledged after the soft limit "
                    f"{after_soft / 2**20:.1f} MiB, after the hard limit {after_hard / 2**20:.1f} MiB; "
                    f"{sum(seconds) / 2**20:.0f} MiB in all" + (f"; client failed: {s.error!r}" if s.error else "")
                )
                print(f"    MiB/s each second: {[round(x / 2**20, 1) for x in seconds]}")
                if name == "proxy":
                    slowed = not failed and None not in (throttled, crossed_soft) and throttled >= crossed_soft - 1
                    verdicts.check(
                        f"proxy: {kind} slowed from the soft limit",
                        slowed,
                        f"below half from {fmt(throttled)}, soft limit crossed at {fmt(crossed_soft)}",
                    )
            disk[name] = past
        verdicts.check(
            "proxy writes no more past the hard limit than Strimzi's plugin",
            disk["proxy"] <= disk["strimzi"],
            f"proxy {disk['proxy'] / 2**20:.1f} MiB, Strimzi {disk['strimzi'] / 2**20:.1f} MiB",
        )
    finally:
        if proxy is not None:
            proxy.stop()
        for cluster in clusters.values():
            cluster.stop()
    return verdicts.exit_code()


def fmt(t) -> str:
    return "never" if t is None else f"{t:.1f} s"


if __name__ == "__main__":
    sys.exit(main())
