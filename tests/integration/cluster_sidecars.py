"""Sidecars sharing one tenant's quota through the usage topic: the tenant, its quota, the sidecar configs, and
producers that each run on "a broker's host" (test_cluster_usage.py, test_cluster_workers.py, test_cluster_replicas.py)."""

from __future__ import annotations

import asyncio
import threading
import time

TOPIC = "shared-tenant"
USAGE_TOPIC = "__kafka_quota_proxy_usage"
RATE = 200_000  # producer_byte_rate, bytes/s
WARM_UP_S, MEASURE_S = 3.0, 3.0  # warm-up: past the start, when each proxy's full bucket (quota.smoothing is on with a
# usage topic) and what it admits before it sees the other's usage are paid back


class SidecarLoop(asyncio.SelectorEventLoop):
    """An event loop on "a broker's host": ``localhost`` is its own sidecar's address."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address

    async def getaddrinfo(self, host, port, **kwargs):
        return await super().getaddrinfo(self.address if host == "localhost" else host, port, **kwargs)


def sidecar_config(host: str, port: int, broker_port: int, scope: str, sidecar_id: str) -> dict:
    settings = {"quota.scope": scope, "quota.window.num": 2, "quota.window.size.seconds": 1}
    if scope == "cluster":
        settings.update(
            {
                "quota.cluster.topic": USAGE_TOPIC,
                "quota.cluster.id": sidecar_id,
                "quota.cluster.sync.ms": 200,
                "quota.cluster.stale.ms": 2000,
            }
        )
    return {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
        "listeners": [{"name": "PLAINTEXT", "bind": f"{host}:{port}"}],
        "metrics": {"bind": "127.0.0.1:0"},
        "quotas": [{"entity": {"client-id": "shared"}, "producer_byte_rate": RATE}],
        "settings": settings,
    }


class Producers:
    """aiokafka producers (client id ``client_id``) flat out through the sidecar at ``address``, on one event loop of
    its own host; every acknowledged message is appended to ``acked`` as (time, bytes)."""

    def __init__(self, address: str, port: int, client_id: str = "shared") -> None:
        self.port, self.client_id = port, client_id
        self.acked: list[tuple[float, int]] = []
        self.loop = SidecarLoop(address)
        self.running = True
        self.tasks: list[asyncio.Future] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def add(self) -> None:
        self.tasks.append(asyncio.run_coroutine_threadsafe(self._produce(), self.loop))

    async def _produce(self) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=f"localhost:{self.port}",
            client_id=self.client_id,
            acks=1,
            linger_ms=5,
            max_batch_size=16384,
            request_timeout_ms=30_000,
        )
        await producer.start()
        try:
            while self.running:
                future = await producer.send(TOPIC, b"v" * 4000)
                future.add_done_callback(
                    lambda f: f.exception() is None and self.acked.append((time.monotonic(), 4000))
                )
        finally:
            await producer.stop()

    def stop(self) -> None:
        self.running = False
        for task in self.tasks:
            task.result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def rate(self, start: float, end: float) -> float:
        return sum(n for at, n in list(self.acked) if start <= at < end) / (end - start) / RATE


def shares_after_warm_up(producers: list[Producers]) -> list[float]:
    """Let ``producers`` (already added to) run through the warm-up and the measurement window, stop them, and return
    what each had acknowledged in the window, per second, in ``RATE``s."""
    start = time.monotonic()
    time.sleep(WARM_UP_S + MEASURE_S)  # deliberate: warm-up and measurement window (a rate group)
    window = (start + WARM_UP_S, start + WARM_UP_S + MEASURE_S)
    shares = [p.rate(*window) for p in producers]
    for p in producers:
        p.stop()
    return shares
