"""What applying the config topic costs the data plane (issue: the control plane never stalls the data plane).

A proxy (its own process, the CLI, uvloop) sits in front of a Tansu broker and follows its config topic
(``__kafka_quota_proxy_configs``). A bystander client sends ApiVersions through the proxy on one connection every
millisecond or so the whole time and records each round trip, and a second one does the same straight to the broker
(what the broker's own stalls add, so the proxy's share can be told apart); /readyz is polled every 50 ms and each
answer timed.
Records are written straight to the broker (confluent-kafka), as any writer of the topic would:

1. start-up: ``--entries`` entries (one per tenant, ``{"user": "tenant-N"}``) are in the topic before the proxy
   starts; measured: time from the proxy's start to /readyz 200 and to every entry in force, the bystander's worst
   wait meanwhile (from its first answer), the slowest /readyz answer;
2. burst: every entry rewritten at once (``--entries`` records as fast as the producer goes): time from the first
   write to all applied (``dynamic_config_applied_total``), the bystander's worst wait;
3. sustained: ``--rate`` changes a second to random tenants for ``--seconds``: the bystander's worst and p99 wait,
   the largest lag seen (records written but not yet applied, sampled every 0.5 s), the proxy's CPU.

Usage: ``python bench/dynamic_config.py [--entries 100000] [--rate 1000] [--seconds 30]``. Run from another
checkout to measure that code (the proxy is started from this file's tree).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port  # noqa: E402
from bench.volume_snapshot import Bystander, cpu_seconds, rss_mib  # noqa: E402

TOPIC = "__kafka_quota_proxy_configs"


def key(i: int) -> bytes:
    return json.dumps({"user": f"tenant-{i:07d}"}, sort_keys=True, separators=(",", ":")).encode()


def value(rate: int) -> bytes:
    return json.dumps({"consumer_byte_rate": 2 * rate, "producer_byte_rate": rate}).encode()


def producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )


def write(p, records) -> int:
    errors: list = []
    n = 0
    for k, v in records:
        while True:
            try:
                p.produce(TOPIC, key=k, value=v, on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.01)
        n += 1
        if n % 10_000 == 0:
            p.poll(0)
    if p.flush(120) != 0 or errors:
        raise RuntimeError(f"write failed: {errors[:3]}")
    return n


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(30)


def metric(url: str, name: str) -> float | None:
    with urllib.request.urlopen(url, timeout=60) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


class ReadyPoller(threading.Thread):
    """/readyz every 50 ms: (when, status, seconds to answer)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.answers, self.stop = url, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    status = response.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                status = 0  # not listening yet
            self.answers.append((started, status, time.perf_counter() - started))
            time.sleep(0.05)

    def first_ready(self) -> float | None:
        return next((t for t, status, _ in list(self.answers) if status == 200), None)


def wait_until(predicate, timeout: float, step: float = 0.05) -> float:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("not within the timeout")
        time.sleep(step)
    return time.perf_counter()


def worst(waits: list[float]) -> str:
    if not waits:
        return "no requests"
    return (
        f"worst {waits[-1] * 1000:.1f} ms, p99 {waits[int(len(waits) * 0.99)] * 1000:.1f} ms ({len(waits):,} requests)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=1000, help="changes a second in the sustained phase")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the sustained phase")
    args = parser.parse_args()
    broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    direct = f"127.0.0.1:{broker_port}"
    procs = [tansu(broker_port, broker_port)]  # advertises itself: the writer and the follower go straight to it
    config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    try:
        create_topic(direct)
        p = producer(direct)
        started = time.perf_counter()
        write(p, ((key(i), value(1_000_000 + i)) for i in range(args.entries)))
        print(
            f"proxy from {ROOT}\n{args.entries:,} entries written to {TOPIC} in {time.perf_counter() - started:.1f} s",
            flush=True,
        )

        config.write(
            f"upstream: {{bootstrap_servers: ['{direct}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
            "quotas: [{entity: {user: '<default>'}, producer_byte_rate: 1048576}]\n"
        )
        config.close()
        ready = ReadyPoller(f"http://127.0.0.1:{metrics_port}/readyz")
        ready.start()
        launched = time.perf_counter()
        proxy = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", config.name, "--log-level", "WARNING"], cwd=ROOT
        )
        procs.append(proxy)
        wait_for_port(proxy_port, 30)
        bystander, control = Bystander(proxy_port), Bystander(broker_port)
        bystander.start()
        control.start()
        listening = time.perf_counter()
        in_force = wait_until(
            lambda: metric(metrics, "kafka_quota_proxy_dynamic_config_entries") == args.entries, 120, 0.1
        )
        wait_until(lambda: ready.first_ready() is not None, 30)
        first_ready = ready.first_ready()
        answers = [a for a in list(ready.answers) if a[1] != 0]
        print(
            f"1. start-up with {args.entries:,} entries in the topic:\n"
            f"  listening {listening - launched:.2f} s after launch; /readyz 200 at {first_ready - launched:.2f} s; "
            f"every entry in force by {in_force - launched:.2f} s (polled every 0.1 s)\n"
            f"  /readyz: {sum(1 for a in answers if a[1] == 503)} answers 503 then 200, slowest answer "
            f"{max((a[2] for a in answers), default=0) * 1000:.1f} ms\n"
            f"  bystander from its first request to every entry in force: {worst(bystander.between(listening, in_force))}"
            f"\n  straight to the broker meanwhile: {worst(control.between(listening, in_force))}"
            f"\n  proxy: {rss_mib(proxy.pid):.0f} MiB RSS",
            flush=True,
        )
        ready.stop.set()

        applied0 = metric(metrics, "kafka_quota_proxy_dynamic_config_applied_total") or 0
        burst_start = time.perf_counter()
        write(p, ((key(i), value(2_000_000 + i)) for i in range(args.entries)))
        written = time.perf_counter()
        done = wait_until(
            lambda: metric(metrics, "kafka_quota_proxy_dynamic_config_applied_total") >= applied0 + args.entries,
            120,
            0.1,
        )
        print(
            f"2. burst: every entry rewritten ({args.entries:,} records):\n"
            f"  written in {written - burst_start:.2f} s, all applied {done - burst_start:.2f} s after the first "
            f"write\n  bystander meanwhile: {worst(bystander.between(burst_start, done))}\n"
            f"  straight to the broker meanwhile: {worst(control.between(burst_start, done))}",
            flush=True,
        )

        applied0 = metric(metrics, "kafka_quota_proxy_dynamic_config_applied_total") or 0
        cpu0 = cpu_seconds(proxy.pid)
        sustained_start = time.perf_counter()
        sent, max_lag = 0, 0.0
        next_sample = sustained_start + 0.5
        rng = random.Random(1)
        while time.perf_counter() - sustained_start < args.seconds:
            due = int((time.perf_counter() - sustained_start) * args.rate)
            while sent < due:
                p.produce(TOPIC, key=key(rng.randrange(args.entries)), value=value(rng.randrange(1, 10**9)))
                sent += 1
            p.poll(0)
            if time.perf_counter() >= next_sample:
                p.flush(10)
                applied = metric(metrics, "kafka_quota_proxy_dynamic_config_applied_total") - applied0
                max_lag = max(max_lag, sent - applied)
                next_sample += 0.5
            time.sleep(0.01)
        p.flush(30)
        sustained_end = time.perf_counter()
        done = wait_until(
            lambda: metric(metrics, "kafka_quota_proxy_dynamic_config_applied_total") >= applied0 + sent, 60, 0.05
        )
        cpu = (cpu_seconds(proxy.pid) - cpu0) / (done - sustained_start)
        print(
            f"3. sustained: {sent:,} changes in {sustained_end - sustained_start:.1f} s "
            f"({sent / (sustained_end - sustained_start):.0f}/s):\n"
            f"  largest lag sampled: {max_lag:.0f} records; the last change applied "
            f"{(done - sustained_end) * 1000:.0f} ms after the last write was acknowledged\n"
            f"  bystander meanwhile: {worst(bystander.between(sustained_start, done))}\n"
            f"  straight to the broker meanwhile: {worst(control.between(sustained_start, done))}\n"
            f"  proxy: {cpu:.2f} cores (bystander included), {rss_mib(proxy.pid):.0f} MiB RSS; records skipped "
            f"{metric(metrics, 'kafka_quota_proxy_dynamic_config_bad_records_total'):.0f} bad",
            flush=True,
        )
        bystander.stop.set()
        control.stop.set()
    finally:
        stop_processes(list(reversed(procs)))
        os.unlink(config.name)


if __name__ == "__main__":
    main()
