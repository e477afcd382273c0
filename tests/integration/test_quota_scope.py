"""``quota.scope`` in cluster mode, with a real client (confluent-kafka) producing at full speed through two broker
ports: under ``broker`` (Kafka's semantics) it gets about 2 x its producer_byte_rate in total, 1 x per broker; under
``cluster`` about 1 x in total.

Tansu runs as a single node (one node id, so one broker port), so this uses the scripted broker
(tests/scripted_broker.py) twice: brokers 1 and 2 of one cluster, each answering Metadata with both brokers and a
topic whose partition 0 is led by broker 1 and partition 1 by broker 2, and accepting every Produce. What reaches
each broker is counted at the broker (Produce frame bytes, with the time they arrived), so the figures are what the
proxy let through, not what it reports. Measured on this machine: about 2.1 x in total under ``broker`` (1.05 x on
each broker) and 1.1 x under ``cluster``; the bounds are generous (1.5-2.5 x, 0.6-1.3 x), rates not timings.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid

import pytest

from proxy.codec.apis import METADATA, PRODUCE
from proxy.codec.messages import decode_request, encode_response, new_response
from tests.harness import cluster_ports, start_proxy
from tests.scripted_broker import ScriptedBroker, answer_normally, produce_answer, response

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

TOPIC = "spread"
TOPIC_ID = uuid.uuid4()
RATE = 100_000  # producer_byte_rate, bytes/s
WARM_UP_S = 1.5  # past most of the fresh entity's burst (quota x (num - 1) x window)
MEASURE_S = 3.0


class TwoBrokers:
    """Brokers 1 and 2 on loopback, scripted: Metadata names both, partition p is led by broker p + 1."""

    def __init__(self) -> None:
        self.arrivals: dict[int, list[tuple[float, int]]] = {1: [], 2: []}  # node id -> (time, Produce bytes)
        self.brokers = {
            node: ScriptedBroker(lambda sock, header, request, node=node: self._answer(node, sock, header, request))
            for node in (1, 2)
        }

    def start(self) -> TwoBrokers:
        for broker in self.brokers.values():
            broker.start()
        return self

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()

    def _answer(self, node, sock, header, request) -> None:
        if header.api_key == PRODUCE:
            self.arrivals[node].append((time.monotonic(), len(request)))
            self.brokers[node].requests.clear()  # keep nothing else: the count is all this test needs
            if header.acks != 0:
                sock.sendall(produce_answer(header, request))
        elif header.api_key == METADATA:
            sock.sendall(self._metadata(header, request))
        else:
            answer_normally(sock, header, request)

    def _metadata(self, header, request) -> bytes:
        version = header.api_version
        asked = decode_request(METADATA, version, memoryview(request)[header.header_length :]).topics
        wanted = asked is None or any(t.name == TOPIC for t in asked)
        topics = (
            [
                {
                    "name": TOPIC,
                    "topic_id": TOPIC_ID,
                    "partitions": [
                        {"partition_index": p, "leader_id": p + 1, "replica_nodes": [p + 1], "isr_nodes": [p + 1]}
                        for p in (0, 1)
                    ],
                }
            ]
            if wanted
            else []
        )
        msg = new_response(
            METADATA,
            version,
            cluster_id="scripted",
            controller_id=1,
            topics=topics,
            brokers=[
                {"node_id": node, "host": "127.0.0.1", "port": broker.port} for node, broker in self.brokers.items()
            ],
        )
        return response(header, encode_response(METADATA, version, msg))

    def bytes_between(self, start: float, end: float) -> dict[int, int]:
        return {
            node: sum(size for at, size in list(arrivals) if start <= at < end)
            for node, arrivals in self.arrivals.items()
        }


def produce_at_full_speed(bootstrap: str, seconds: float) -> None:
    """One confluent-kafka producer, messages to both partitions (so both brokers) as fast as it may."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "spread",
            "enable.idempotence": False,
            "linger.ms": 5,
            "batch.size": 16384,
            "queue.buffering.max.kbytes": 256,
            "acks": 1,
        }
    )
    value = b"v" * 4000
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        try:
            producer.produce(TOPIC, value=value, partition=sent % 2)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge()  # what is still queued would drain at the quota's pace; the test has what it measures
    producer.flush(2)


@pytest.mark.parametrize("scope,low,high", [("broker", 1.5, 2.5), ("cluster", 0.6, 1.3)])
def test_a_client_on_two_brokers_gets_its_quota_per_broker_or_once(scope, low, high, tmp_path):
    """Also: the usage log says which broker port each record's traffic came through, which proxy wrote it and
    under which scope (what the planner recommends by)."""
    cluster = TwoBrokers().start()
    bootstrap, base = cluster_ports(4)
    try:
        proxy = start_proxy(
            {
                "upstream": {"bootstrap_servers": [f"127.0.0.1:{cluster.brokers[1].port}"]},
                "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{bootstrap}", "broker_port_base": base}],
                "metrics": {"bind": "127.0.0.1:0"},
                "quotas": [{"entity": {"client-id": "spread"}, "producer_byte_rate": RATE}],
                "settings": {"quota.scope": scope, "quota.window.num": 3, "quota.window.size.seconds": 1},
                "usage_log": {"dir": str(tmp_path / "usage"), "interval_seconds": 1},
            }
        )
    except BaseException:
        cluster.stop()
        raise
    try:
        start = time.monotonic()
        client = threading.Thread(
            target=produce_at_full_speed, args=(f"127.0.0.1:{bootstrap}", WARM_UP_S + MEASURE_S + 0.2)
        )
        client.start()
        client.join(30)
        measured = cluster.bytes_between(start + WARM_UP_S, start + WARM_UP_S + MEASURE_S)
    finally:
        proxy.stop()
        cluster.stop()
    assert measured[1] > 0 and measured[2] > 0, f"the client did not reach both brokers: {measured}"
    total = sum(measured.values()) / MEASURE_S / RATE
    per_broker = [measured[n] / MEASURE_S / RATE for n in (1, 2)]
    assert low <= total <= high, f"quota.scope {scope}: {total:.2f} x producer_byte_rate in total ({per_broker})"
    if scope == "broker":  # each broker's own budget: about 1 x on each
        assert all(0.7 <= share <= 1.3 for share in per_broker), per_broker
    usage = [json.loads(line) for f in (tmp_path / "usage").iterdir() for line in f.read_text().splitlines()]
    produced = {r["broker"] for r in usage if r["api"] == "Produce" and r["client_id"] == "spread"}
    assert produced == {1, 2}, produced  # node ids of the broker ports; the bootstrap port (null) saw no Produce
    assert {(r["proxy"], r["scope"]) for r in usage} == {(f"{socket.gethostname()}:{bootstrap}", scope)}
