"""What one big volume-usage record costs the data plane (issue: the control plane never stalls the data plane).

A proxy (its own process, the CLI, uvloop) follows the volume-usage topic of a Tansu broker. A bystander client
sends ApiVersions back to back on one connection the whole time and records each round trip. The bench then
writes, through the proxy (as an admin), one snapshot after another for the broker:

1. a small good one (3 volumes), the baseline;
2. one listing 100,000 volumes (about 6 MB): past ``max_record_bytes`` (refused unread since 0f5af36);
3. one at the volume limit: 10,000 volumes, under 1 MiB (taken).

For each: the bystander's worst and 99th-percentile wait in the seconds after the write, /metrics' size and how
long one scrape takes (and the bystander's worst wait during it), the proxy's CPU over the next 10 s (idle: no
client but the bystander... which is why its own cost is given first) and its resident memory.

Usage: ``python bench/volume_snapshot.py [--window 5] [--idle 10]``. Run from another checkout to measure that
code (the proxy is started from this file's tree).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port  # noqa: E402
from proxy.codec.apis import API_VERSIONS  # noqa: E402
from proxy.codec.header import encode_request_header  # noqa: E402
from quota.managers.volume import Limit, Snapshot, Volume  # noqa: E402

GB = 1_000_000_000
BROKER_ID = 111  # Tansu's node id
TOPIC = "__kafka_quota_proxy_volume_usage"


class Bystander(threading.Thread):
    """ApiVersions v0 back to back on one connection; every round trip's (start, seconds)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.waits: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def run(self) -> None:
        correlation = 0
        while not self.stop.is_set():
            correlation += 1
            header = encode_request_header(API_VERSIONS, 0, correlation, "bystander")
            started = time.perf_counter()
            self.sock.sendall(struct.pack(">i", len(header)) + header)
            (size,) = struct.unpack(">i", self._read(4))
            self._read(size)
            self.waits.append((started, time.perf_counter() - started))
            time.sleep(0.001)  # ~1,000 requests/s: a steady client, not a flood

    def between(self, start: float, end: float) -> list[float]:
        return sorted(w for t, w in list(self.waits) if start <= t < end)


def snapshot(volumes: int, used_gb: int) -> bytes:
    return Snapshot(
        BROKER_ID,
        int(time.time() * 1000),
        Limit("MinFreePercentage", 50),
        Limit("MinFreePercentage", 10),
        tuple(Volume(f"/data/{i}", 100 * GB, used_gb * GB + i) for i in range(volumes)),
    ).to_json()


def publish(bootstrap: str, value: bytes) -> None:
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 16 << 20, "acks": "all", "linger.ms": 0})
    producer.produce(
        TOPIC, key=str(BROKER_ID).encode(), value=value, on_delivery=lambda err, msg: err and errors.append(err)
    )
    if producer.flush(60) != 0 or errors:
        raise RuntimeError(f"publish failed: {errors}")


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(30)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def scrape(url: str) -> tuple[bytes, float]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
    return body, time.perf_counter() - started


def sample(body: bytes, name: str) -> str:
    lines = [line for line in body.decode().splitlines() if line.startswith(name)]
    return (
        ", ".join(
            line.rsplit(" ", 1)[1] if "{" not in line else line.split("{", 1)[1].replace("}", " =") for line in lines
        )
        or "-"
    )


def report(label: str, bystander: Bystander, start: float, end: float, url: str, pid: int, idle_s: float) -> None:
    waits = bystander.between(start, end)
    worst = waits[-1] * 1000 if waits else float("nan")
    p99 = waits[int(len(waits) * 0.99)] * 1000 if waits else float("nan")
    scrape_start = time.perf_counter()
    body, scrape_s = scrape(url)
    during = bystander.between(scrape_start, time.perf_counter())
    cpu_before = cpu_seconds(pid)
    time.sleep(idle_s)
    cpu = (cpu_seconds(pid) - cpu_before) / idle_s
    state = [
        line.split('"')[1]
        for line in body.decode().splitlines()
        if line.startswith("kafka_quota_proxy_volume_state{") and line.endswith(" 1.0")
    ]
    print(
        f"{label}:\n"
        f"  bystander after the write: worst {worst:.1f} ms, p99 {p99:.1f} ms ({len(waits)} requests)\n"
        f"  /metrics: {len(body):,} bytes, scraped in {scrape_s * 1000:.0f} ms, bystander worst during it "
        f"{(during[-1] * 1000 if during else 0):.1f} ms\n"
        f"  proxy: {cpu:.3f} cores over the next {idle_s:g} s (bystander included), {rss_mib(pid):.0f} MiB RSS\n"
        f"  state {state[0] if state else '?'}; bad records "
        f"{sample(body, 'kafka_quota_proxy_volume_bad_records_total')}; volumes "
        f"{sample(body, 'kafka_quota_proxy_volume_volumes ')}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=5.0, help="seconds measured after each write")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of CPU measured after each write")
    args = parser.parse_args()
    broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    procs = [tansu(broker_port, proxy_port)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
            "admin_principals: ['User:ANONYMOUS']\n"
            "volume_usage: {freshness_seconds: 600, missing_data_action: OPEN}\n"
        )
    proxy = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "ERROR"], cwd=ROOT
    )
    procs.append(proxy)
    try:
        wait_for_port(proxy_port)
        wait_for_port(metrics_port)
        bootstrap = f"127.0.0.1:{proxy_port}"
        create_topic(bootstrap)
        bystander = Bystander(proxy_port)
        bystander.start()
        time.sleep(1)
        cases = [
            ("small snapshot, 3 volumes (baseline)", snapshot(3, 20)),
            ("100,000 volumes (refused: past max_record_bytes)", snapshot(100_000, 20)),
            ("10,000 volumes, at the limit (taken)", snapshot(10_000, 20)),
        ]
        print(f"proxy from {ROOT}")
        for label, value in cases:
            print(f"-- writing {label}: {len(value):,} bytes", flush=True)
            start = time.perf_counter()
            publish(bootstrap, value)
            time.sleep(args.window)
            report(label, bystander, start, time.perf_counter(), url, proxy.pid, args.idle)
        bystander.stop.set()
    finally:
        stop_processes(list(reversed(procs)))
        os.unlink(f.name)


if __name__ == "__main__":
    main()
