"""A tenant storming topic creation while a worker is killed over and over (issue 35), against Tansu, through the
real command line with two workers. Each restarted worker used to start with a full KIP-599 bucket: a burst of
``controller_mutation_rate x controller.quota.window.num`` topics per restart on top of the quota. Now it takes a
serving peer's buckets, so over the whole storm the topics the broker holds stay within the burst plus the refill.

This test waits real seconds (restarts and syncs between processes are real); the bound is computed from the storm's
measured length, so a slow machine widens it as it widens what the quota allows. Measured on a busy 2-core machine
with three restarts: 28 and 29 topics in 4.7 and 7.5 s (the quota allows 25 and 28), and with the seed left out 70
and 76 in 3.6 and 4.2 s.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from contextlib import contextmanager

import pytest

from proxy.codec.apis import CREATE_TOPICS, METADATA
from proxy.codec.error_codes import NONE, THROTTLING_QUOTA_EXCEEDED
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import wait_until
from tests.integration.raw import read_frame
from tests.integration.workers import worker_pids, workers_proxy

pytestmark = pytest.mark.integration

RATE, WINDOW_NUM = 1, 20  # topics per second, and windows of 1 s: a burst of 20, then one a second
BURST = RATE * WINDOW_NUM
KILLS = 3
STORMERS = 2  # threads, each creating one topic per new connection, back to back
SLACK = 10  # admitted between two syncs of the workers, rounding, a busy machine: half of what one restart gave


def request(port: int, api: int, version: int, msg, client_id: str):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.settimeout(30)
        sock.sendall(frame(encode_request_header(api, version, 1, client_id) + encode_request(api, version, msg)))
        body = read_frame(sock)
    whole = len(body).to_bytes(4, "big") + body
    return decode_response(api, version, whole[response_header_length(api, version, whole) :])


def create_topic(port: int, name: str) -> int:
    """CreateTopics v6 (strict: refused with THROTTLING_QUOTA_EXCEEDED past the quota) of one 1-partition topic on a
    new connection, as client ``storm``: the topic's error code."""
    msg = new_request(
        CREATE_TOPICS,
        6,
        timeout_ms=10000,
        validate_only=False,
        topics=[{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
    )
    (topic,) = request(port, CREATE_TOPICS, 6, msg, "storm").topics
    return topic.error_code


def topics_named(port: int, prefix: str) -> int:
    """The topics the broker holds whose name starts with ``prefix`` (Metadata v4 for all topics)."""
    answer = request(
        port, METADATA, 4, new_request(METADATA, 4, topics=None, allow_auto_topic_creation=False), "observer"
    )
    return sum(1 for t in answer.topics if t.name.startswith(prefix))


@contextmanager
def two_workers(tmp_path):
    quotas = f"[{{entity: {{client-id: storm}}, controller_mutation_rate: {RATE}}}]"
    settings = {
        "shutdown.grace.period.ms": 1000,
        "controller.quota.window.num": WINDOW_NUM,
        "controller.quota.window.size.seconds": 1,
    }
    with workers_proxy(tmp_path, 2, quotas, **settings) as (_, bootstrap, metrics_port, log):
        wait_until(lambda: len(worker_pids(log)) == 2, 30, "both workers logged as serving")
        yield int(bootstrap.rsplit(":", 1)[1]), metrics_port, log


def test_a_tenant_storming_topic_creation_gains_nothing_from_worker_restarts(tmp_path):
    """Two stormers create one topic per new connection, back to back, while worker 0 is SIGKILLed KILLS times
    (each time once its predecessor serves again). The topics the broker ends with stay within the burst plus one
    a second over the storm. Before the seed each restart added up to a burst (20) of its own."""
    run = uuid.uuid4().hex[:6]
    with two_workers(tmp_path) as (port, metrics_port, log):
        stop, codes, lock, counter = threading.Event(), [], threading.Lock(), iter(range(10**6))

        def storm() -> None:
            while not stop.is_set():
                with lock:
                    n = next(counter)
                try:
                    code = create_topic(port, f"storm-{run}-{n}")
                except OSError:  # the worker holding the connection was killed: the topic may exist or not
                    code = -1
                with lock:
                    codes.append(code)

        threads = [threading.Thread(target=storm) for _ in range(STORMERS)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        try:
            wait_until(lambda: THROTTLING_QUOTA_EXCEEDED in codes, 60, "the burst spent: a topic refused")
            for _ in range(KILLS):
                before = worker_pids(log)["0"]
                os.kill(before, signal.SIGKILL)
                wait_until(lambda: worker_pids(log).get("0") not in (None, before), 60, "worker 0 started again")
                served = len(codes)
                wait_until(lambda: len(codes) >= served + 10, 60, "ten more creates answered after the restart")
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        elapsed = time.monotonic() - t0
        created = topics_named(port, f"storm-{run}-")
        bound = BURST + RATE * elapsed + SLACK
        assert codes.count(NONE) <= created, codes
        assert codes.count(THROTTLING_QUOTA_EXCEEDED) > created, (created, codes.count(THROTTLING_QUOTA_EXCEEDED))
        assert created <= bound, (
            f"{created} topics in {elapsed:.1f} s with {KILLS} worker restarts; the quota "
            f"allows {BURST} + {RATE}/s: {bound:.0f}"
        )
