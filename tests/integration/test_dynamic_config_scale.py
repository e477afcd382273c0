"""The config topic at scale, against Tansu (issue: the control plane never stalls the data plane): kafka-python
writes a few thousand entries straight to the broker while the proxy follows the topic; a bystander client on the
proxy keeps getting its answers meanwhile (checked on the answers: every request answered, in order, while the
entries were being applied, never on timings); a record past ``dynamic_config.max_value_bytes`` is skipped and
counted while the good record after it applies."""

from __future__ import annotations

import json
import threading
import time

import pytest

from config.dynamic import entity_key
from proxy.codec.apis import API_VERSIONS
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.integration.quota_apis import described

pytestmark = pytest.mark.integration

TOPIC = "__kafka_quota_proxy_configs"
ENTRIES = 3000


class Bystander(threading.Thread):
    """ApiVersions through the proxy, one after another on one connection, until told to stop; every answer kept
    (its correlation id must be the request's: raw.exchange checks)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = raw.connect(port)
        self.answered: list[float] = []  # when each answer came
        self.failure: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        correlation = 0
        try:
            while not self.stop.is_set():
                correlation += 1
                assert (
                    raw.exchange(
                        self.sock,
                        API_VERSIONS,
                        3,
                        correlation,
                        client_software_name="bystander",
                        client_software_version="1",
                    ).error_code
                    == 0
                )
                self.answered.append(time.monotonic())
                time.sleep(0.002)  # deliberate: the bystander's pace (its waits are what is measured)
        except BaseException as exc:  # noqa: BLE001 -- the test says what went wrong
            self.failure = exc
        finally:
            self.sock.close()

    def between(self, start: float, end: float) -> int:
        return sum(1 for t in list(self.answered) if start <= t <= end)


@pytest.fixture
def cluster():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()  # writers go straight to it
    config = proxy_config(proxy_port, broker_port, quotas=[{"entity": {"user": "<default>"}, "producer_byte_rate": 1}])
    config["dynamic_config"] = {"max_value_bytes": 1024}
    try:
        proxy = start_proxy(config)
    except BaseException:
        broker.stop()
        raise
    try:
        yield proxy, f"127.0.0.1:{broker_port}"
    finally:
        try:
            proxy.stop()
        finally:
            broker.stop()


def test_thousands_of_entries_apply_while_a_bystander_is_answered_and_an_oversized_record_is_skipped(cluster):
    from kafka import KafkaProducer

    proxy, broker = cluster
    # ready: the config topic (created empty) read to its end once
    wait_until(lambda: proxy.metric("kafka_quota_proxy_ready") == 1, 30, "the first read of the config topic")
    bystander = Bystander(proxy.port)
    bystander.start()
    producer = KafkaProducer(bootstrap_servers=broker, acks="all", linger_ms=5)
    try:
        started = time.monotonic()
        for i in range(ENTRIES):
            producer.send(
                TOPIC,
                key=entity_key({"user": f"tenant-{i}"}),
                value=json.dumps({"producer_byte_rate": 1000 + i}).encode(),
            )
        producer.flush(60)
        oversized = json.dumps({"producer_byte_rate": 5, "note": "x" * 2000}).encode()  # past max_value_bytes
        producer.send(TOPIC, key=entity_key({"user": "tenant-0"}), value=oversized)
        producer.send(TOPIC, key=entity_key({"user": "tenant-1"}), value=b'{"producer_byte_rate": 7}')
        producer.flush(60)
    finally:
        producer.close(5)
    wait_until(
        lambda: described(proxy.bootstrap, {"user": "tenant-1"}) == {"producer_byte_rate": 7},
        30,
        "the good record after the oversized one",
    )
    applied = time.monotonic()
    bystander.stop.set()
    bystander.join(10)

    assert bystander.failure is None, bystander.failure
    assert bystander.between(started, applied) >= 5  # answered while the entries were written and applied
    assert proxy.metric("kafka_quota_proxy_dynamic_config_entries") == ENTRIES
    # the oversized record skipped: tenant-0's entry stays
    assert described(proxy.bootstrap, {"user": "tenant-0"}) == {"producer_byte_rate": 1000}
    assert described(proxy.bootstrap, {"user": f"tenant-{ENTRIES - 1}"}) == {"producer_byte_rate": 1000 + ENTRIES - 1}
    assert described(proxy.bootstrap, {"user": None}) == {"producer_byte_rate": 1}  # the YAML's default under them
    assert proxy.metric("kafka_quota_proxy_dynamic_config_records_skipped_total", reason="value_too_large") == 1
    assert proxy.metric("kafka_quota_proxy_dynamic_config_bad_records_total") == 0
    assert proxy.metric("kafka_quota_proxy_dynamic_config_applied_total") == ENTRIES + 1
