"""The tenants of bench/evasion.py and the proxy they run against: Tansu and the proxy in its own process with one
quota configuration (:func:`proxied`), and tenants built from real clients (Produce, Fetch and CreateTopics frames
over plain sockets, built in bench/kafka_requests.py; kafka-python idempotent producers; bare connections from
several loopback addresses), each returning a :class:`Tally` of what it got."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, tansu, wait_for_port  # noqa: E402
from bench.kafka_requests import at_broker, create_topics_body, exchange, produce_body  # noqa: E402
from demo.storms import connect_once  # noqa: E402
from proxy.codec.apis import CREATE_TOPICS, FETCH, PRODUCE  # noqa: E402
from proxy.codec.header import encode_request_header  # noqa: E402
from proxy.codec.messages import encode_request, new_request  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
TOPIC, FILLED_BATCHES = "evasion", 64
BYTE_QUOTA, VALUE_BYTES = 256 * KIB, 16 * KIB  # bytes/s, in requests of 16 KiB: 16 requests a second
MUTATION_RATE = 5  # partitions/s
PID_RATE, PID_WINDOW_S = 5, 10  # new producer ids per 10 s window: 0.5 a second
CONNECTION_RATE = 5  # new connections/s per IP
TANSU_NODE_ID = 111
SETTINGS = {
    "quota.window.num": 2,
    "quota.window.size.seconds": 1,
    "controller.quota.window.num": 2,
    "controller.quota.window.size.seconds": 1,
    "producer.id.quota.window.num": 1,
    "producer.id.quota.window.size.seconds": PID_WINDOW_S,
}
IO_ERRORS = (OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError)


# -- the proxy in front of Tansu ----------------------------------------------------------------------------------


@dataclass
class Proxied:
    port: int
    broker_port: int
    metrics_url: str
    pid: int

    def rss_mib(self) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples with these labels (0 when the proxy does not answer)."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return 0.0
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total


@contextmanager
def proxied(quotas: list[str], settings: dict, extra_yaml: str = ""):
    """Yield a Proxied: Tansu advertising the proxy, the proxy as its own process, its log in a temporary file."""
    broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    broker = tansu(broker_port, proxy_port)
    lines = [
        f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}",
        f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]",
        f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}",
        "dynamic_config: {enabled: false}",
        "settings: {" + ", ".join(f"{k}: {v}" for k, v in {**SETTINGS, **settings}.items()) + "}",
        f"quotas: [{', '.join(quotas)}]",
        extra_yaml,
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("\n".join(lines).replace("'", '"') + "\n")
    log = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
    proxy = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "ERROR"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(proxy_port)
        yield Proxied(proxy_port, broker_port, f"http://127.0.0.1:{metrics_port}/metrics", proxy.pid)
    finally:
        proxy.terminate()
        try:
            proxy.wait(15)
        except subprocess.TimeoutExpired:
            proxy.kill()
        broker.kill()  # Tansu ignores SIGTERM
        broker.wait(10)
        log.close()
        os.unlink(f.name)
        os.unlink(log.name)


# -- the tenants' requests ---------------------------------------------------------------------------------------


def fetch_body(offset: int) -> bytes:
    return encode_request(
        FETCH,
        11,
        new_request(
            FETCH,
            11,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=MIB,
            topics=[
                {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": MIB}]}
            ],
        ),
    )


@dataclass
class Tally:
    """What the tenant got, when: (seconds since start, amount) per success; failures and throttles counted."""

    done: list[tuple[float, float]]
    failed: int = 0
    throttled: int = 0

    def rate(self, start: float, end: float) -> float:
        return sum(amount for t, amount in self.done if start <= t < end) / (end - start)


async def tenant(
    port: int,
    seconds: float,
    workers: int,
    fresh_connection: bool,
    client_ids: Callable[[], str],
    request: Callable[[int], tuple[int, int, bytes]],
    judge,
) -> Tally:
    """``workers`` loops for ``seconds``, each sending ``request(n) -> (api key, version, body)`` one at a time, on
    one connection or on a new connection per request, with the client id ``client_ids()`` gives each request.
    ``judge(response) -> (amount got, throttled)``; an amount of 0 is a failure."""
    tally, start, numbers = Tally([]), time.monotonic(), itertools.count(1)

    async def worker() -> None:
        conn = None
        while time.monotonic() - start < seconds:
            n = next(numbers)
            api_key, version, body = request(n)
            try:
                if conn is None:
                    conn = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
                response = await asyncio.wait_for(exchange(*conn, api_key, version, client_ids(), n, body), 30)
            except IO_ERRORS:
                tally.failed += 1
                if conn is not None:
                    conn[1].close()
                conn = None
                continue
            amount, throttled = judge(response)
            tally.throttled += throttled
            if amount:
                tally.done.append((time.monotonic() - start, amount))
            else:
                tally.failed += 1
            if fresh_connection:
                conn[1].close()
                conn = None
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(worker() for _ in range(workers)))
    return tally


def same(name: str) -> Callable[[], str]:
    return lambda: name


def rotating(prefix: str) -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"{prefix}-{next(counter)}"


# -- the tenants, one kind per quota ------------------------------------------------------------------------------


def producer(workers: int, fresh_connection: bool, client_ids: Callable[[], str], value_bytes: int = VALUE_BYTES):
    """Produce v7 requests of one ``value_bytes`` record, acks=1; counted in request bytes, as the quota counts."""
    body = produce_body(TOPIC, b"e" * value_bytes)
    size = len(encode_request_header(PRODUCE, 7, 1, "tenant-000000")) + len(body) + 4

    def judge(response):
        codes = [p.error_code for r in response.responses for p in r.partition_responses]
        return size if codes == [0] else 0, response.throttle_time_ms > 0

    def run(proxy: Proxied, seconds: float) -> Tally:
        at_broker(proxy.broker_port, [(CREATE_TOPICS, 7, create_topics_body(7, TOPIC))])
        return asyncio.run(
            tenant(proxy.port, seconds, workers, fresh_connection, client_ids, lambda n: (PRODUCE, 7, body), judge)
        )

    return run


def consumer(workers: int, fresh_connection: bool, client_ids: Callable[[], str]):
    """Fetch v11 from a topic of FILLED_BATCHES batches of 16 KiB, one offset after another (round and round);
    counted in record bytes received."""

    def judge(response):
        got = sum(len(p.records or b"") for t in response.responses for p in t.partitions)
        return got, response.throttle_time_ms > 0

    def run(proxy: Proxied, seconds: float) -> Tally:
        batch = produce_body(TOPIC, b"f" * VALUE_BYTES)
        at_broker(
            proxy.broker_port,
            [(CREATE_TOPICS, 7, create_topics_body(7, TOPIC))] + [(PRODUCE, 7, batch)] * FILLED_BATCHES,
        )
        return asyncio.run(
            tenant(
                proxy.port,
                seconds,
                workers,
                fresh_connection,
                client_ids,
                lambda n: (FETCH, 11, fetch_body(n % FILLED_BATCHES)),
                judge,
            )
        )

    return run


def topic_creator(
    workers: int, fresh_connection: bool, client_ids: Callable[[], str], version: int, partitions: int = 1
):
    """CreateTopics of one new topic per request; counted in partitions created."""

    def judge(response):
        codes = [t.error_code for t in response.topics]
        return partitions if codes == [0] else 0, response.throttle_time_ms > 0

    def run(proxy: Proxied, seconds: float) -> Tally:
        return asyncio.run(
            tenant(
                proxy.port,
                seconds,
                workers,
                fresh_connection,
                client_ids,
                lambda n: (CREATE_TOPICS, version, create_topics_body(version, f"t-{n}", partitions)),
                judge,
            )
        )

    return run


def restart_loop(threads: int):
    """kafka-python idempotent producers, one after another in each thread: each sends one message (its first
    Produce carries a new producer id) and closes. Counted when the message is acknowledged; "throttled" is the
    proxy's count of Produce requests throttled by the producer-id quota."""

    def run(proxy: Proxied, seconds: float) -> Tally:
        from kafka import KafkaProducer

        at_broker(proxy.broker_port, [(CREATE_TOPICS, 7, create_topics_body(7, TOPIC))])
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        tally, start, lock = Tally([]), time.monotonic(), threading.Lock()

        def loop(i: int) -> None:
            for n in itertools.count():
                if time.monotonic() - start >= seconds:
                    return
                try:
                    p = KafkaProducer(
                        bootstrap_servers=f"127.0.0.1:{proxy.port}",
                        client_id=f"restart-{i}-{n}",
                        enable_idempotence=True,
                        acks="all",
                        max_block_ms=10000,
                        request_timeout_ms=10000,
                    )
                    try:
                        p.send(TOPIC, b"x").get(20)
                    finally:
                        p.close(5)
                except Exception:  # a refused or held connection: the client gives up, the loop goes on
                    with lock:
                        tally.failed += 1
                    continue
                with lock:
                    tally.done.append((time.monotonic() - start, 1))

        workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(seconds + 60)
        tally.throttled = int(proxy.metric("kafka_quota_proxy_producer_ids_throttled_requests_total"))
        return tally

    return run


def connection_storm(ips: int, workers_per_ip: int):
    """``workers_per_ip`` loops per source address 127.0.0.2, 127.0.0.3, ...: connect, ApiVersions, close."""

    def run(proxy: Proxied, seconds: float) -> Tally:
        async def storm() -> Tally:
            tally, start = Tally([]), time.monotonic()

            async def worker(ip: str) -> None:
                while time.monotonic() - start < seconds:
                    if await connect_once("127.0.0.1", proxy.port, ip, 5.0) == "served":
                        tally.done.append((time.monotonic() - start, 1))
                    else:
                        tally.failed += 1
                        await asyncio.sleep(0.01)

            await asyncio.gather(*(worker(f"127.0.0.{2 + i}") for i in range(ips) for _ in range(workers_per_ip)))
            return tally

        return asyncio.run(storm())

    return run
