"""The usage log written by a running proxy (against Tansu, kafka-python clients): one record per entity per
interval, totals that agree with the proxy's own counters, and the last interval written at shutdown."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from proxy.codec.apis import METADATA
from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c
from tests.integration.raw import connect, exchange

pytestmark = pytest.mark.integration


def test_usage_log_records_what_clients_did(tmp_path):
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=[
            {
                "entity": {"user": "<default>"},
                "producer_ids_rate": 1000,
            },  # new producer ids are counted while it is set
            {"entity": {"client-id": "<default>"}, "controller_mutation_rate": 1000},
        ],
    )
    config["usage_log"] = {"dir": str(tmp_path / "usage"), "interval_seconds": 1}
    # the proxy's own config follower fetches through the proxy until it stops, after the counters are read: off,
    # so that the log and the counters cover the same traffic
    config["dynamic_config"] = {"enabled": False}
    proxy = start_proxy(config)
    try:
        c.kp_create_topic(proxy.bootstrap, "usage", 3)
        c.kp_produce(proxy.bootstrap, "usage", 300, enable_idempotence=True, acks="all")
        time.sleep(1.5)  # at least one interval boundary in the middle of the run
        c.kp_consume(proxy.bootstrap, "usage", 300)
        counters = {
            name: proxy.metric(f"kafka_quota_proxy_{name}_total", listener="PLAINTEXT", api=api)
            for name, api in (("requests", "Produce"), ("request_bytes", "Produce"), ("response_bytes", "Fetch"))
        }
        accepted = proxy.metric("kafka_quota_proxy_connections_accepted_total", listener="PLAINTEXT")
    finally:
        proxy.stop()
        broker.stop()
    lines = [
        line
        for name in sorted(os.listdir(tmp_path / "usage"))
        for line in (tmp_path / "usage" / name).read_text().splitlines()
    ]
    found = [json.loads(line) for line in lines]
    times = sorted({r["time"] for r in found})
    assert len(times) >= 2  # several intervals
    keys = [(r["time"], r["listener"], r["ip"], r["user"], r["client_id"], r["api"]) for r in found]
    assert len(keys) == len(set(keys))  # one record per entity per interval

    def total(field: str, api: str | None) -> int:
        return sum(r[field] for r in found if r["api"] == api)

    # everything the proxy counted is in the log, the last interval included (written at shutdown)
    assert total("requests", "Produce") == counters["requests"]
    assert total("request_bytes", "Produce") == counters["request_bytes"]
    assert total("response_bytes", "Fetch") == counters["response_bytes"]
    assert total("connections_opened", None) == accepted
    assert all(r["ip"] == "127.0.0.1" and r["listener"] == "PLAINTEXT" for r in found)
    # a sidecar: its own id (host name and listener port), no broker node id, Kafka's per-broker scope
    assert {(r["proxy"], r["broker"], r["scope"]) for r in found} == {
        (f"{socket.gethostname()}:{proxy_port}", None, "broker")
    }
    assert total("partition_mutations", "CreateTopics") == 3
    assert total("new_producer_ids", "Produce") == 1  # one idempotent producer, one producer id
    assert {r["user"] for r in found if r["api"] is not None} == {"ANONYMOUS"}


def test_a_throttled_producer_is_logged_with_its_quota_the_rate_seen_and_the_time_held(tmp_path):
    """A producer held by a 200,000 B/s producer_byte_rate (3 x 1 s windows): its records carry the quota in force,
    the rate each throttle was decided on (above the quota), and the time it was held, never more than an interval
    in one record, however many requests were throttled: what the planner's demand estimate reads."""
    from kafka import KafkaProducer

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port,
        broker_port,
        quotas=[
            {"entity": {"client-id": "held"}, "producer_byte_rate": 200_000},
            {"entity": {"client-id": "raw-test"}, "request_rate": 2},  # tests.integration.raw's client id
        ],
        **{"quota.window.num": 3, "quota.request.rate.apis": "Metadata"},
    )
    config["usage_log"] = {"dir": str(tmp_path / "usage"), "interval_seconds": 1}
    config["dynamic_config"] = {"enabled": False}
    proxy = start_proxy(config)
    try:
        c.kp_create_topic(proxy.bootstrap, "held", 1)
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="held", linger_ms=5)
        try:  # 1.6 MB at 200,000 B/s: about 6 s past the first windows' allowance
            futures = [producer.send("held", value=bytes(10_000)) for _ in range(160)]
            producer.flush(60)
            for f in futures:
                f.get(30)
        finally:
            producer.close(10)
        poller = connect(proxy.port)  # Metadata over its request_rate of 2/s: held by it, not by a byte rate
        try:
            for i in range(6):
                exchange(poller, METADATA, 9, i, topics=[])
        finally:
            poller.close()
    finally:
        proxy.stop()
        broker.stop()
    found = [
        json.loads(line)
        for name in sorted(os.listdir(tmp_path / "usage"))
        for line in (tmp_path / "usage" / name).read_text().splitlines()
    ]
    held = [r for r in found if r["client_id"] == "held" and r["api"] == "Produce"]
    throttled = [r for r in held if r["throttles"]]
    assert throttled, held
    assert all(r["quota_rate"] == 200_000 and r["observed_rate_sum"] / r["throttles"] > 200_000 for r in throttled)
    assert all(r["held_ms"] <= round(r["interval_s"] * 1000) + 5 for r in held), held  # wall vs monotonic: a ms or two
    assert sum(r["held_ms"] for r in held) > 0
    assert all(r["quota_rate"] is None for r in held if not r["throttles"])
    # the requests held, by the quota that held them: the byte rate's, nothing else held this client
    assert sum((r["held_by"] or {}).get("producer_byte_rate", 0) for r in held) >= len(throttled)
    assert all(set(r["held_by"] or {}) <= {"producer_byte_rate"} for r in held)
    polled = [r for r in found if r["client_id"] == "raw-test"]
    assert sum((r["held_by"] or {}).get("request_rate", 0) for r in polled) >= 1, polled
    # its request rate's throttle is on Kafka's sampled rate too: counted in throttles, its quota in requests/s
    assert all(set(r["held_by"] or {}) <= {"request_rate"} for r in polled), polled
    assert {r["quota_rate"] for r in polled if r["throttles"]} == {2.0}, polled
