"""Evasion: what a hostile tenant can and cannot escape, quota by quota (issue 17, "Evasion written down").

Each case starts Tansu and the proxy (in its own process; a PLAINTEXT listener, so every client's principal is
User:ANONYMOUS) with one quota configuration, runs one tenant flat out for ``--seconds`` and prints what the
tenant got after the first ``--warmup`` seconds as a ratio of its quota: about 1 (or below) is held, well above 1
is escaped. The windows are shortened (``quota.window.num`` 2 x 1 s, ``controller.quota.window.num`` 2 x 1 s) so
a run of a few seconds is in steady state; with Kafka's default 11 windows a fresh entity's start-up allowance,
which a tenant rotating names collects again and again, is ten times larger.

The tenants use real clients: Produce v7, Fetch v11 and CreateTopics frames built with the proxy's codec over plain
sockets (so "a new connection per request" costs one TCP connect and nothing else), kafka-python idempotent
producers for the producer-id quota (aiokafka's InitProducerId fails on Tansu), bare ApiVersions connections from
several loopback source addresses for the connection rate. Each line also gives what the tenant cost the proxy:
its resident memory at the end (every client id gets quota sensors, kept for an hour after their last use, as
Kafka keeps them), the most client connections it held open at once (a connection its client abandoned stays open
while it is muted, with its broker connection) and how many it closed because it had no file descriptor left for
their broker connection (``fd_exhausted_total``). The proxy's own log goes to a temporary file. Nothing is
asserted.

Usage: ``python bench/evasion.py [--seconds 8] [--warmup 2] [--cases bytes,fetch,mutations,pids,connections,volume]``
(a case number such as ``2a`` runs that case alone)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import struct
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

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from bench.common import ROOT, free_port, tansu, wait_for_port  # noqa: E402
from proxy.codec.apis import CREATE_TOPICS, FETCH, PRODUCE  # noqa: E402
from proxy.codec.error_codes import THROTTLING_QUOTA_EXCEEDED  # noqa: E402
from proxy.codec.header import encode_request_header, frame, response_header_length  # noqa: E402
from proxy.codec.messages import decode_response, encode_request, new_request  # noqa: E402
from demo.storms import connect_once  # noqa: E402
from quota.volume import Limit, Snapshot, Volume  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
TOPIC, FILLED_BATCHES = "evasion", 64
BYTE_QUOTA, VALUE_BYTES = 256 * KIB, 16 * KIB  # bytes/s, in requests of 16 KiB: 16 requests a second
MUTATION_RATE = 5  # partitions/s
PID_RATE, PID_WINDOW_S = 5, 10  # new producer ids per 10 s window: 0.5 a second
CONNECTION_RATE = 5  # new connections/s per IP
TANSU_NODE_ID = 111
SETTINGS = {
    "quota.window.num": 2, "quota.window.size.seconds": 1,
    "controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1,
    "producer.id.quota.window.num": 1, "producer.id.quota.window.size.seconds": PID_WINDOW_S,
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
    lines = [f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}",
             f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]",
             f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}",
             "dynamic_config: {enabled: false}",
             "settings: {" + ", ".join(f"{k}: {v}" for k, v in {**SETTINGS, **settings}.items()) + "}",
             f"quotas: [{', '.join(quotas)}]", extra_yaml]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("\n".join(lines).replace("'", '"') + "\n")
    log = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
    proxy = subprocess.Popen([sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "ERROR"],
                             cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
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


# -- raw Kafka requests -------------------------------------------------------------------------------------------

async def exchange(reader, writer, api_key: int, version: int, client_id: str, correlation_id: int, body: bytes):
    writer.write(frame(encode_request_header(api_key, version, correlation_id, client_id) + body))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    response = struct.pack(">i", size) + await reader.readexactly(size)
    if struct.unpack_from(">i", response, 4)[0] != correlation_id:
        raise ConnectionError("correlation id mismatch")
    return decode_response(api_key, version, response[response_header_length(api_key, version, response):])


def produce_body(topic: str, value: bytes, key: bytes | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=len(value) + 1024)
    builder.append(0, timestamp=None, key=key, value=value, headers=[])
    return encode_request(PRODUCE, 7, new_request(PRODUCE, 7, acks=1, timeout_ms=10000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.build())}]}]))


def fetch_body(offset: int) -> bytes:
    return encode_request(FETCH, 11, new_request(FETCH, 11, max_wait_ms=500, min_bytes=1, max_bytes=MIB, topics=[
        {"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": MIB}]}]))


def create_topics_body(version: int, name: str, partitions: int = 1) -> bytes:
    return encode_request(CREATE_TOPICS, version, new_request(CREATE_TOPICS, version, timeout_ms=10000, topics=[
        {"name": name, "num_partitions": partitions, "replication_factor": 1}]))


def at_broker(broker_port: int, requests: list[tuple[int, int, bytes]]) -> None:
    """Requests straight to the broker (set-up the quotas never see), one after another on one connection."""
    async def send():
        reader, writer = await asyncio.open_connection("127.0.0.1", broker_port)
        try:
            for n, (api_key, version, body) in enumerate(requests, 1):
                await exchange(reader, writer, api_key, version, "bench-setup", n, body)
        finally:
            writer.close()

    asyncio.run(send())


@dataclass
class Tally:
    """What the tenant got, when: (seconds since start, amount) per success; failures and throttles counted."""

    done: list[tuple[float, float]]
    failed: int = 0
    throttled: int = 0

    def rate(self, start: float, end: float) -> float:
        return sum(amount for t, amount in self.done if start <= t < end) / (end - start)


async def tenant(port: int, seconds: float, workers: int, fresh_connection: bool, client_ids: Callable[[], str],
                 request: Callable[[int], tuple[int, int, bytes]], judge) -> Tally:
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
        return asyncio.run(tenant(proxy.port, seconds, workers, fresh_connection, client_ids,
                                  lambda n: (PRODUCE, 7, body), judge))
    return run


def consumer(workers: int, fresh_connection: bool, client_ids: Callable[[], str]):
    """Fetch v11 from a topic of FILLED_BATCHES batches of 16 KiB, one offset after another (round and round);
    counted in record bytes received."""
    def judge(response):
        got = sum(len(p.records or b"") for t in response.responses for p in t.partitions)
        return got, response.throttle_time_ms > 0

    def run(proxy: Proxied, seconds: float) -> Tally:
        batch = produce_body(TOPIC, b"f" * VALUE_BYTES)
        at_broker(proxy.broker_port, [(CREATE_TOPICS, 7, create_topics_body(7, TOPIC))]
                  + [(PRODUCE, 7, batch)] * FILLED_BATCHES)
        return asyncio.run(tenant(proxy.port, seconds, workers, fresh_connection, client_ids,
                                  lambda n: (FETCH, 11, fetch_body(n % FILLED_BATCHES)), judge))
    return run


def topic_creator(workers: int, fresh_connection: bool, client_ids: Callable[[], str], version: int,
                  partitions: int = 1):
    """CreateTopics of one new topic per request; counted in partitions created."""
    def judge(response):
        codes = [t.error_code for t in response.topics]
        return partitions if codes == [0] else 0, response.throttle_time_ms > 0

    def run(proxy: Proxied, seconds: float) -> Tally:
        return asyncio.run(tenant(proxy.port, seconds, workers, fresh_connection, client_ids,
                                  lambda n: (CREATE_TOPICS, version, create_topics_body(version, f"t-{n}",
                                                                                        partitions)), judge))
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
                    p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", client_id=f"restart-{i}-{n}",
                                      enable_idempotence=True, acks="all", max_block_ms=10000,
                                      request_timeout_ms=10000)
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


VOLUME_TOPIC = "__kafka_quota_proxy_volume_usage"
VOLUME_YAML = f"volume_usage: {{source: topic, produce_base_rate: {2 * BYTE_QUOTA}, pause_delay_ms: 200}}"


def under_disk_pressure(used_percent: int, run_tenant: Callable[[Proxied, float], Tally]):
    """Publish one snapshot of Tansu's disk at ``used_percent`` (soft limit 50 %, hard 90 %: 70 % scales produce
    quotas by 0.5, 95 % pauses produce), as a sidecar would, wait for the proxy to take it, then run the tenant."""
    def run(proxy: Proxied, seconds: float) -> Tally:
        snapshot = Snapshot(TANSU_NODE_ID, int(time.time() * 1000), Limit("MinFreePercentage", 50),
                            Limit("MinFreePercentage", 10), (Volume("/disk", 100 * 10**9, used_percent * 10**9),))
        at_broker(proxy.broker_port, [(CREATE_TOPICS, 7, create_topics_body(7, VOLUME_TOPIC)),
                                      (PRODUCE, 7, produce_body(VOLUME_TOPIC, snapshot.to_json(),
                                                                str(TANSU_NODE_ID).encode()))])
        expected = "PAUSE" if used_percent >= 90 else "THROTTLE"
        deadline = time.monotonic() + 20
        while proxy.metric("kafka_quota_proxy_volume_state", state=expected) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        return run_tenant(proxy, seconds)
    return run


# -- the cases ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    group: str
    what: str
    quotas: list[str]
    quota: float  # the rate the tenant is held to, per second
    unit: str
    run: Callable[[Proxied, float], Tally]
    settings: dict | None = None
    extra_yaml: str = ""


def entry(entity: str, key: str, value: float) -> str:
    name, _, value_of = entity.partition(":")
    return f"{{entity: {{{name}: '{value_of}'}}, {key}: {value}}}"


CLIENT_BYTES = entry("client-id:<default>", "producer_byte_rate", BYTE_QUOTA)
USER_BYTES = entry("user:<default>", "producer_byte_rate", BYTE_QUOTA)
CLIENT_FETCH = entry("client-id:<default>", "consumer_byte_rate", BYTE_QUOTA)
IP_RATE = entry("ip:<default>", "connection_creation_rate", CONNECTION_RATE)
CLIENT_MUTATIONS = entry("client-id:<default>", "controller_mutation_rate", MUTATION_RATE)
USER_MUTATIONS = entry("user:<default>", "controller_mutation_rate", MUTATION_RATE)
USER_PIDS = entry("user:<default>", "producer_ids_rate", PID_RATE)
USER_VOLUME_BYTES = entry("user:<default>", "producer_byte_rate", 2 * BYTE_QUOTA)
FRESH = 4  # concurrent loops of a tenant opening a new connection per request
PER_IP = 8  # max.connections.per.ip where set: muted connections count until their mute ends
B, PIDS = "B", "producer ids"
IP = f"ip connection_creation_rate {CONNECTION_RATE}/s"

CASES = [
    Case("bytes", "1. polite: one connection, one client id (client-id producer_byte_rate)", [CLIENT_BYTES],
         BYTE_QUOTA, B, producer(1, False, same("tenant"))),
    Case("bytes", "2a. a new connection per request, one client id", [CLIENT_BYTES], BYTE_QUOTA, B,
         producer(FRESH, True, same("tenant"))),
    Case("bytes", f"2b. the same, with {IP}", [CLIENT_BYTES, IP_RATE], BYTE_QUOTA, B,
         producer(FRESH, True, same("tenant"))),
    Case("bytes", f"2c. the same, with {IP}, 1 MiB produces", [CLIENT_BYTES, IP_RATE], BYTE_QUOTA, B,
         producer(FRESH, True, same("tenant"), MIB)),
    Case("bytes", f"2d. a new connection per request, max.connections.per.ip {PER_IP}", [CLIENT_BYTES], BYTE_QUOTA,
         B, producer(FRESH, True, same("tenant")), {"max.connections.per.ip": PER_IP}),
    Case("bytes", "2e. the same, 1 MiB produces", [CLIENT_BYTES], BYTE_QUOTA, B,
         producer(FRESH, True, same("tenant"), MIB), {"max.connections.per.ip": PER_IP}),
    Case("bytes", "3a. a new client id per request, one connection", [CLIENT_BYTES], BYTE_QUOTA, B,
         producer(1, False, rotating("tenant"))),
    Case("bytes", "3b. the same against a user quota (User:ANONYMOUS)", [USER_BYTES], BYTE_QUOTA, B,
         producer(1, False, rotating("tenant"))),
    Case("bytes", "3c. a new client id and a new connection per request (user quota)", [USER_BYTES], BYTE_QUOTA, B,
         producer(FRESH, True, rotating("tenant"))),
    Case("bytes", f"3d. the same, with {IP}", [USER_BYTES, IP_RATE], BYTE_QUOTA, B,
         producer(FRESH, True, rotating("tenant"))),
    Case("fetch", "1f. polite: one connection, one client id (client-id consumer_byte_rate)", [CLIENT_FETCH],
         BYTE_QUOTA, B, consumer(1, False, same("reader"))),
    Case("fetch", "2f. a new connection per fetch, one client id", [CLIENT_FETCH], BYTE_QUOTA, B,
         consumer(FRESH, True, same("reader"))),
    Case("fetch", f"2g. the same, with {IP}", [CLIENT_FETCH, IP_RATE], BYTE_QUOTA, B,
         consumer(FRESH, True, same("reader"))),
    Case("fetch", "3f. a new client id per fetch, one connection", [CLIENT_FETCH], BYTE_QUOTA, B,
         consumer(1, False, rotating("reader"))),
    Case("mutations", "4a. CreateTopics v7 (strict), one connection, one client id (client-id quota)",
         [CLIENT_MUTATIONS], MUTATION_RATE, "partitions", topic_creator(1, False, same("admin"), 7)),
    Case("mutations", "4b. CreateTopics v7, a new connection per request", [CLIENT_MUTATIONS], MUTATION_RATE,
         "partitions", topic_creator(FRESH, True, same("admin"), 7)),
    Case("mutations", "4c. CreateTopics v5 (permissive: admitted, then throttled), a new connection per request",
         [CLIENT_MUTATIONS], MUTATION_RATE, "partitions", topic_creator(FRESH, True, same("admin"), 5)),
    Case("mutations", f"4d. the same, with {IP}, 20-partition topics", [CLIENT_MUTATIONS, IP_RATE], MUTATION_RATE,
         "partitions", topic_creator(FRESH, True, same("admin"), 5, 20)),
    Case("mutations", "4e. CreateTopics v7, a new client id per request, one connection", [CLIENT_MUTATIONS],
         MUTATION_RATE, "partitions", topic_creator(1, False, rotating("admin"), 7)),
    Case("mutations", "4f. the same against a user quota", [USER_MUTATIONS], MUTATION_RATE, "partitions",
         topic_creator(1, False, rotating("admin"), 7)),
    Case("mutations", f"4g. CreateTopics v5, a new connection per request, max.connections.per.ip {PER_IP}",
         [CLIENT_MUTATIONS], MUTATION_RATE, "partitions", topic_creator(FRESH, True, same("admin"), 5),
         {"max.connections.per.ip": PER_IP}),
    Case("pids", "5a. restart loop: a new idempotent producer per message, 4 threads", [USER_PIDS],
         PID_RATE / PID_WINDOW_S, PIDS, restart_loop(4)),
    Case("pids", "5b. the same, with ip connection_creation_rate 1/s",
         [USER_PIDS, entry("ip:<default>", "connection_creation_rate", 1)], PID_RATE / PID_WINDOW_S, PIDS,
         restart_loop(4)),
    Case("pids", f"5c. the same, with max.connections.per.ip {PER_IP}", [USER_PIDS], PID_RATE / PID_WINDOW_S, PIDS,
         restart_loop(4), {"max.connections.per.ip": PER_IP}),
    Case("connections", f"6a. many connections from one IP ({IP})", [IP_RATE], CONNECTION_RATE, "connections",
         connection_storm(1, 16)),
    Case("connections", "6b. the same from 8 IPs (127.0.0.2-9)", [IP_RATE], CONNECTION_RATE, "connections",
         connection_storm(8, 4)),
    Case("connections", f"6c. the same, with max.connection.creation.rate {CONNECTION_RATE}", [IP_RATE],
         CONNECTION_RATE, "connections", connection_storm(8, 4), {"max.connection.creation.rate": CONNECTION_RATE}),
    Case("volume", "7a. disk between soft and hard (x 0.5), one client id, one connection", [], BYTE_QUOTA, B,
         under_disk_pressure(70, producer(1, False, same("tenant"))), extra_yaml=VOLUME_YAML),
    Case("volume", "7b. the same, a new client id per request", [], BYTE_QUOTA, B,
         under_disk_pressure(70, producer(1, False, rotating("tenant"))), extra_yaml=VOLUME_YAML),
    Case("volume", "7c. the same with a user producer_byte_rate (scaled)", [USER_VOLUME_BYTES], BYTE_QUOTA, B,
         under_disk_pressure(70, producer(1, False, rotating("tenant"))), extra_yaml=VOLUME_YAML),
    Case("volume", "7d. disk past the hard limit (PAUSE): new client id and connection per request", [], BYTE_QUOTA,
         B, under_disk_pressure(95, producer(FRESH, True, rotating("tenant"))), extra_yaml=VOLUME_YAML),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds left out of the measurement")
    parser.add_argument("--cases", default="bytes,fetch,mutations,pids,connections,volume",
                        help="groups to run, or case numbers such as 2a,3b")
    args = parser.parse_args()
    wanted = set(args.cases.split(","))
    started = time.monotonic()
    print(f"ratio = what the tenant got per second from {args.warmup:g} s to {args.seconds:g} s / its quota; "
          f"byte quotas {BYTE_QUOTA // KIB} KiB/s ({VALUE_BYTES // KIB} KiB records), controller_mutation_rate "
          f"{MUTATION_RATE}/s, producer_ids_rate {PID_RATE} per {PID_WINDOW_S} s, connection_creation_rate "
          f"{CONNECTION_RATE}/s; windows 2 x 1 s")
    for case in CASES:
        if case.group not in wanted and case.what.split(".")[0] not in wanted:
            continue
        with proxied(case.quotas, case.settings or {}, case.extra_yaml) as proxy:
            held, stop = [0.0], threading.Event()

            def sample() -> None:  # the most client connections the proxy held open at once
                while not stop.wait(0.5):
                    held[0] = max(held[0], proxy.metric("kafka_quota_proxy_active_connections"))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                tally = case.run(proxy, args.seconds)
            finally:
                stop.set()
                sampler.join(5)
            no_fds = proxy.metric("kafka_quota_proxy_fd_exhausted_total")
            rss = proxy.rss_mib()
        rate = tally.rate(args.warmup, args.seconds)
        print(f"  {case.what:88} {rate / case.quota:7.2f} x  ({rate:,.1f} {case.unit}/s; {len(tally.done)} done, "
              f"{tally.throttled} throttled, {tally.failed} failed; proxy RSS {rss:.0f} MiB, held <= {held[0]:.0f} "
              f"connections"
              + (f", {no_fds:.0f} closed for want of file descriptors" if no_fds else "") + ")", flush=True)
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
