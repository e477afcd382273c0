"""New producer ids laundered across workers and peers (issue 35), against Tansu, as a hostile tenant does it: a
Produce with a new producer id is held on one worker (or proxy), the client closes (the hold is abandoned: its token
back), and the same id is sent on a new connection, which may land on the other worker (or goes to the other proxy
sharing the usage topic). Before, that one had been told the id was known when it was held, and let it through:
33 and 43 ids in 30 s where the quota allowed 7. A relay in front of Tansu records which producer ids reach it.

These tests wait real seconds (a hold is the client's time, and a sync between processes is real): the loop runs
for LOOP_S, and the bound is the quota's burst plus its refill over the loop plus two, against about one id per
loop turn (a turn is a second or two) when ids are laundered.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from proxy.codec.apis import PRODUCE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_for_port, wait_until
from tests.integration.clients import ck_create_topic
from tests.integration.raw import read_frame
from tests.integration.workers import ready
from tests.relay import BrokerSideRecorder

pytestmark = pytest.mark.integration

RATE, WINDOW_S = 2, 10  # new ids per window, one window: a burst of 2, then one every 5 s
SETTINGS = {
    "producer.id.quota.window.num": 1,
    "producer.id.quota.window.size.seconds": WINDOW_S,
    "producer.id.quota.max.hold.ms": 8_000,
}
QUOTAS = [{"entity": {"user": "<default>"}, "producer_ids_rate": RATE}]
LOOP_S = 12.0
ANSWER_S = 0.4  # no answer by then: held
SYNC_S = 0.5  # past a sync between the workers (100 ms) or the proxies (quota.cluster.sync.ms 200)


def produce(topic: str, pid: int, corr: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
    msg = new_request(
        PRODUCE,
        9,
        acks=1,
        timeout_ms=30000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.build())}]}],
    )
    return frame(encode_request_header(PRODUCE, 9, corr, "launderer") + encode_request(PRODUCE, 9, msg))


def answered(port: int, topic: str, pid: int) -> bool:
    """A Produce of ``pid`` on a new connection: True if answered within ANSWER_S; else the connection is closed
    (a held request abandoned)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(produce(topic, pid, 1))
        sock.settimeout(ANSWER_S)
        try:
            read_frame(sock)
            return True
        except (TimeoutError, ConnectionError):
            return False


def launder(first: int, second: int, topic: str, base: int) -> None:
    """The hostile loop: a new id to ``first``; held, it is abandoned and resent (up to three times) to
    ``second``, each unanswered try abandoned in turn."""
    pid, end = base, time.monotonic() + LOOP_S
    while time.monotonic() < end:
        if not answered(first, topic, pid):
            for _ in range(3):
                time.sleep(SYNC_S)  # deliberate: the hostile client waits as long as the sync before retrying
                if answered(second, topic, pid):
                    break
        pid += 1


def ids_through(recorder: BrokerSideRecorder, base: int) -> int:
    return len({pid for pid in recorder.first_seen() if pid >= base})


def bound() -> float:
    return RATE + RATE * LOOP_S / WINDOW_S + 2


@contextmanager
def two_workers_behind_a_recorder(tmp_path):
    proxy_port, broker_port, metrics_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    recorder = BrokerSideRecorder(("127.0.0.1", broker_port)).start()
    settings = {"workers": 2, "shutdown.grace.period.ms": 3000, **SETTINGS}
    cfg = tmp_path / "proxy.yaml"
    cfg.write_text(
        f"upstream: {{bootstrap_servers: ['127.0.0.1:{recorder.port}']}}\n"
        f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
        f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
        "settings: {" + ", ".join(f"{k}: {v}" for k, v in settings.items()) + "}\n"
        "quotas: [{entity: {user: '<default>'}, producer_ids_rate: " + str(RATE) + "}]\n"
    )
    with open(tmp_path / "proxy.log", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", str(cfg)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        wait_for_port(metrics_port, timeout=30)
        wait_until(lambda: ready(metrics_port), 60, "the parent's /readyz says ready")
        yield proxy_port, recorder
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        recorder.stop()
        broker.stop()


def test_an_abandoned_hold_resent_across_two_workers_is_not_let_through_as_known(tmp_path):
    with two_workers_behind_a_recorder(tmp_path) as (port, recorder):
        topic = f"launder-{uuid.uuid4().hex[:8]}"
        ck_create_topic(f"127.0.0.1:{port}", topic, 1)
        base = random.randrange(1 << 40, 1 << 50)
        launder(port, port, topic, base)  # a new connection lands on either worker (SO_REUSEPORT)
        through = ids_through(recorder, base)
    print(f"2 workers: {through} new ids reached the broker in {LOOP_S:.0f} s (quota: {bound() - 2:.1f})")
    assert through <= bound(), through


def test_an_abandoned_hold_resent_to_the_other_proxy_sharing_usage_is_not_let_through_as_known():
    ports, broker_port = [free_port(), free_port()], free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{ports[0]}").start()
    recorder = BrokerSideRecorder(("127.0.0.1", broker_port)).start()
    proxies = []
    try:
        for name, port in zip("ab", ports):
            proxies.append(
                start_proxy(
                    proxy_config(
                        port,
                        recorder.port,
                        quotas=QUOTAS,
                        **SETTINGS,
                        **{
                            "quota.scope": "cluster",
                            "quota.cluster.topic": "__kafka_quota_proxy_usage",
                            "quota.cluster.id": name,
                            "quota.cluster.sync.ms": 200,
                        },
                    ),
                    loop_kind="asyncio",
                )
            )
        topic = f"launder-{uuid.uuid4().hex[:8]}"
        ck_create_topic(f"127.0.0.1:{ports[0]}", topic, 1)
        base = random.randrange(1 << 40, 1 << 50)
        launder(ports[0], ports[1], topic, base)
        through = ids_through(recorder, base)
    finally:
        for proxy in proxies:
            proxy.stop()
        recorder.stop()
        broker.stop()
    print(f"2 proxies: {through} new ids reached the broker in {LOOP_S:.0f} s (quota: {bound() - 2:.1f})")
    assert through <= bound(), through
