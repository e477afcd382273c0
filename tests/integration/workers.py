"""A proxy run with several worker processes (``kafka-quota-proxy run`` with ``workers``) and the parent's merged
/metrics, read as an operator's Prometheus reads them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager

from tests.harness import Tansu, free_port, wait_for_port, wait_until

QUOTA = 1024 * 1024  # producer_byte_rate, bytes/s, of client-id "spread" (large against the 64 KiB batches)
WINDOW_NUM, WINDOW_S = 3, 1  # a short window: the start-up burst is 2 s of quota, the span 3 s


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def samples(text: str, name: str, **labels) -> dict[str, float]:
    """worker -> value of ``name`` with ``labels`` (the parent's merged exposition labels each sample)."""
    found = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.rindex("}") + 1]))
        if all(got.get(k) == v for k, v in labels.items()):
            found[got.get("worker", "")] = found.get(got.get("worker", ""), 0.0) + float(line.rsplit(" ", 1)[1])
    return found


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def workers_proxy(tmp_path, workers: int, quotas: str | None = None, env: dict | None = None, **settings):
    """The proxy's command line with ``workers`` workers in front of a Tansu of its own; ``quotas`` (YAML flow) in
    place of the ``spread`` client's producer_byte_rate, ``env`` added to its environment. Yields (process,
    bootstrap, metrics port, log file)."""
    proxy_port, broker_port, metrics_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    all_settings = {
        **({"workers": workers} if workers > 1 else {}),
        "shutdown.grace.period.ms": 3000,
        "quota.window.num": WINDOW_NUM,
        "quota.window.size.seconds": WINDOW_S,
        **settings,
    }
    cfg = tmp_path / "proxy.yaml"
    cfg.write_text(
        f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
        f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
        f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
        "settings: {" + ", ".join(f"{k}: {v}" for k, v in all_settings.items()) + "}\n"
        f"quotas: {quotas or f'[{{entity: {{client-id: spread}}, producer_byte_rate: {QUOTA}}}]'}\n"
    )
    log = tmp_path / "proxy.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", str(cfg)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    try:
        wait_for_port(metrics_port, timeout=30)
        wait_until(lambda: ready(metrics_port), 60, "the parent's /readyz says ready")
        yield proc, f"127.0.0.1:{proxy_port}", metrics_port, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        broker.stop()


def worker_pids(log) -> dict[str, int]:
    """worker index -> pid of its latest start, from the parent's log lines."""
    return {index: int(pid) for index, pid in re.findall(r"worker (\d+) serving \(pid (\d+)\)", log.read_text())}
