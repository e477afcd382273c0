"""A full entity table never takes a well-behaved newcomer's service away (issue 44, T4, T5, T6), through a real proxy
in front of Tansu: an attacker keeps a small table (``quota.max.tracked.entities`` 300) full and turning over with
new client ids or new source addresses, and a newcomer arriving meanwhile is measured against its own quota. At
62922c2 every newcomer past the cap shared the one ``<overflow>`` sensor, bucket or rate the flood drained."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable
from functools import partial

import pytest

from bench.kafka_requests import at_broker, create_topics_body, produce_body
from demo.storms import connect_once
from proxy.codec.apis import CREATE_TOPICS, PRODUCE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.integration.faults import ProxyProcess
from tests.integration.raw import recv_exactly

pytestmark = pytest.mark.integration

CAP = 300


def request(sock: socket.socket, api_key: int, version: int, corr: int, client_id: str, body: bytes):
    sock.sendall(frame(encode_request_header(api_key, version, corr, client_id) + body))
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    answer = recv_exactly(sock, size)
    assert struct.unpack_from(">i", answer)[0] == corr
    header = 4 if (api_key, version) != (CREATE_TOPICS, 7) else 5  # CreateTopics v5+ has a flexible header
    return decode_response(api_key, version, answer[header:])


def flood(port: int, frames: str, threads: int) -> FloodProcess:
    """``threads`` threads in a process of their own, each sending ``frames`` frames (a new entity each, see
    :data:`FRAMES`) on one connection until stopped, reconnecting as needed. A process of its own: threads here
    would share the interpreter lock with the newcomer, and on a saturated machine the newcomer then waited its
    turn behind them (0.40 x in a CI run, with the proxy keeping up): the test measured itself, not the proxy."""
    stop = multiprocessing.get_context("spawn").Event()
    process = multiprocessing.get_context("spawn").Process(
        target=_flood_process, args=(port, frames, threads, stop), daemon=True
    )
    process.start()
    return FloodProcess(process, stop)


class FloodProcess:
    def __init__(self, process, stop) -> None:
        self.process, self._stop = process, stop

    def stop(self) -> None:
        self._stop.set()
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


def _produce_frames(k: int) -> Callable[[int], bytes]:
    body = encode_request(
        PRODUCE,
        7,
        new_request(
            PRODUCE,
            7,
            acks=0,
            timeout_ms=1000,
            topic_data=[{"name": "full-tables", "partition_data": [{"index": 0, "records": produce_records()}]}],
        ),
    )
    return lambda n: frame(encode_request_header(PRODUCE, 7, n, f"flood-{k}-{n}") + body)


def _empty_create_frames(k: int) -> Callable[[int], bytes]:
    body = encode_request(CREATE_TOPICS, 7, new_request(CREATE_TOPICS, 7, timeout_ms=5000, topics=[]))
    return lambda n: frame(encode_request_header(CREATE_TOPICS, 7, n, f"empty-{k}-{n}") + body)


# acks=0 Produce frames under a new client id each; CreateTopics of no topics under a new client id each
FRAMES = {"produce": _produce_frames, "empty-creates": _empty_create_frames}


def _flood_process(port: int, frames: str, threads: int, stop) -> None:
    if hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, 0, max(0, os.getpriority(os.PRIO_PROCESS, 0)))  # the attacker: never raised

    def run(k: int) -> None:
        make = FRAMES[frames](k)
        n = 0
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    while not stop.is_set():
                        s.sendall(make(n))
                        n += 1
            except OSError:
                pass

    workers = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def scraped_value(ops_port: int, name: str, **labels) -> float:
    """The sum of ``name``'s samples with these labels on a proxy's /metrics, read over HTTP (0 before it answers)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ops_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return 0.0  # the ops port opens after the listeners (the proxy's own clients start between): not yet
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


# Not long_running: it then runs late in its rate group, not in the suite's first minutes, when every worker starts
# clusters and Spark. There, with the machine saturated (load 13-15), the newcomer got 0.48 x in two full runs and
# 0.40 x in a CI run, with the flood's threads in the test's own process. Twelve busy loops beside it (either way)
# leave it at 1.00 x; the flood now runs in a process of its own. An open finding, not hidden.
@pytest.mark.measures_rate
def test_a_newcomer_gets_its_produce_quota_while_client_id_churn_keeps_the_sensor_table_full(tmp_path):
    """T5: {client-id: <default>} producer_byte_rate 40 kB/s; three connections send acks=0 Produce frames under a
    new client id each; a newcomer then produces 2 kB at a time, acks=1, for 6 s: it gets at least 0.8 x its quota
    (counted in the request bytes the quota counts). The proxy runs in a process of its own, as deployed: in this
    one, the flood's sending threads would share the interpreter lock with it and measure the test, not the proxy.
    The broker is this test's own, started inside it, so it runs at the measurement's priority with the proxy (see
    tests/conftest.py): a module's broker started before stayed at normal priority, and in a CI-like run the flood
    the raised proxy forwarded kept it so busy that the newcomer's acks=1 answers waited (0.72 x)."""
    quota = 40_000
    broker = free_port()
    tansu = Tansu(broker, advertised=f"127.0.0.1:{broker}").start()
    try:
        newcomer_share(broker, quota, tmp_path)
    finally:
        tansu.stop()


def newcomer_share(broker: int, quota: int, tmp_path) -> None:
    at_broker(broker, [(CREATE_TOPICS, 7, create_topics_body(7, "full-tables"))])
    port, ops = free_port(), free_port()
    config = proxy_config(
        port,
        broker,
        [{"entity": {"client-id": "<default>"}, "producer_byte_rate": quota}],
        **{"quota.max.tracked.entities": CAP},
    )
    config["metrics"] = {"bind": f"127.0.0.1:{ops}"}
    proxy = ProxyProcess(config, str(tmp_path / "proxy.yaml"), port)
    proxy.start()
    evictions = partial(
        scraped_value, ops, "kafka_quota_proxy_quota_overflowed_records_total", quota="producer_byte_rate"
    )
    floods = flood(port, "produce", 3)
    try:
        wait_until(lambda: evictions() > 3 * CAP, 30, "the table full and turning over")
        body = produce_body("full-tables", b"v" * 2000)
        sent = 0
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            start = time.monotonic()
            corr = 0
            while time.monotonic() - start < 6:
                corr += 1
                request(s, PRODUCE, 7, corr, "newcomer", body)
                sent += len(body) + len(encode_request_header(PRODUCE, 7, corr, "newcomer"))
            elapsed = time.monotonic() - start
        evicted = evictions()
    finally:
        floods.stop()
        proxy.stop()
    share = sent / (quota * elapsed)
    print(f"FULL_TABLES produce: newcomer {share:.2f} x its quota over {elapsed:.1f} s, {evicted:.0f} evictions")
    assert share >= 0.8, share
    assert evicted > 3 * CAP


def produce_records() -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1024,
    )
    builder.append(0, timestamp=None, key=None, value=b"x" * 40, headers=[])
    return bytes(builder.build())


@pytest.mark.long_running(seconds=12)
def test_a_newcomers_creates_are_admitted_as_its_bucket_allows_while_empty_creates_fill_the_table(broker):
    """T4: {client-id: <default>} controller_mutation_rate 10/s; CreateTopics with no topics under a new client id
    each keep the bucket table full and turning over, and one 300-partition create under one more new id; a
    newcomer creating a 1-partition topic every 125 ms (8/s, within its rate) for 5 s has them admitted: its bucket
    starts empty in a full table and refills at its rate (at 62922c2 none was: the shared <overflow> bucket was
    19 s in debt)."""
    proxy = start_proxy(
        proxy_config(
            free_port(),
            broker,
            [{"entity": {"client-id": "<default>"}, "controller_mutation_rate": 10}],
            **{"quota.max.tracked.entities": CAP},
        )
    )
    floods = flood(proxy.port, "empty-creates", 2)
    try:
        wait_until(
            lambda: (
                proxy.metric("kafka_quota_proxy_quota_overflowed_records_total", quota="controller_mutation_rate") > CAP
            ),
            30,
            "the bucket table full",
        )
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as big:  # its own connection: muted
            request(big, CREATE_TOPICS, 7, 1, "big-new", create_topics_body(7, "full-tables-big", 300))
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            codes = []
            start = time.monotonic()
            for i in range(40):
                answer = request(s, CREATE_TOPICS, 7, 2 + i, "newcomer", create_topics_body(7, f"new-{i}-{start}"))
                codes.append(answer.topics[0].error_code)
                time.sleep(max(0.0, start + (i + 1) * 0.125 - time.monotonic()))
        evicted = proxy.metric("kafka_quota_proxy_quota_overflowed_records_total", quota="controller_mutation_rate")
    finally:
        floods.stop()
        proxy.stop()
    print(f"FULL_TABLES mutations: newcomer {codes.count(0)} of {len(codes)} created, {evicted:.0f} evictions")
    assert codes.count(0) >= 36, codes


@pytest.mark.long_running(seconds=10)
def test_a_new_address_is_served_at_its_rate_while_rotating_addresses_fill_the_ip_table(broker):
    """T6: {ip: <default>} connection_creation_rate 5/s; connections from 1,500 loopback addresses, one each, keep
    the IP table full and turning over; a newcomer from another address connecting twice a second for 5 s is served
    every time."""
    proxy = start_proxy(
        proxy_config(
            free_port(),
            broker,
            [{"entity": {"ip": "<default>"}, "connection_creation_rate": 5}],
            **{"quota.max.tracked.entities": CAP},
        )
    )

    async def storm() -> list[str]:
        async def attacker():
            for i in range(1500):
                await connect_once("127.0.0.1", proxy.port, f"127.3.{i // 250}.{1 + i % 250}")

        async def newcomer():
            await asyncio.sleep(1.0)  # the table is full by then
            outcomes = []
            for _ in range(10):
                outcomes.append(await connect_once("127.0.0.1", proxy.port, "127.0.0.99"))
                await asyncio.sleep(0.5)
            return outcomes

        _, outcomes = await asyncio.gather(attacker(), newcomer())
        return outcomes

    try:
        outcomes = asyncio.run(storm())
        evicted = proxy.metric("kafka_quota_proxy_quota_overflowed_records_total", quota="connection_creation_rate")
    finally:
        proxy.stop()
    print(
        f"FULL_TABLES connections: newcomer {outcomes.count('served')} of {len(outcomes)} served, "
        f"{evicted:.0f} evictions"
    )
    assert outcomes == ["served"] * 10, outcomes
    assert evicted > 0
