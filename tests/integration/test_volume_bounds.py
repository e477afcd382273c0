"""Volume-usage records bounded, against Tansu: confluent-kafka writes snapshots to the volume-usage topic through
the proxy (as an admin), the proxy's follower reads them back from Tansu. A 100,000-volume record (about 6 MB) is
refused unread, counted as too_large, and the PAUSE the broker's last good snapshot decided stays, with /metrics
no bigger than before; a record at the volume limit (10,000 volumes, under 1 MiB) is taken, and /metrics carries
per-volume series for the 10 volumes nearest their hard limit only, with a client on another connection served
throughout."""

from __future__ import annotations

import time
import urllib.request

import pytest

from proxy.codec.apis import METADATA
from quota.managers.volume import Limit, Snapshot, Volume
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.integration.clients import ck_create_topic

pytestmark = pytest.mark.integration

GB = 1_000_000_000
BROKER_ID = 111  # what Tansu reports as its node id
VOLUME_TOPIC = "__kafka_quota_proxy_volume_usage"


def snapshot(volumes: int, used_gb: int) -> bytes:
    return Snapshot(
        BROKER_ID,
        int(time.time() * 1000),
        Limit("MinFreePercentage", 50),
        Limit("MinFreePercentage", 10),
        tuple(Volume(f"/data/{i}", 100 * GB, used_gb * GB + i) for i in range(volumes)),
    ).to_json()


def publish(bootstrap: str, value: bytes) -> None:
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 16 << 20, "acks": "all"})
    producer.produce(
        VOLUME_TOPIC, key=str(BROKER_ID).encode(), value=value, on_delivery=lambda err, msg: err and errors.append(err)
    )
    assert producer.flush(30) == 0 and not errors, errors


def scrape(proxy) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/metrics", timeout=10) as response:
        return response.read()


@pytest.fixture
def proxy():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port)
    config["admin_principals"] = ["User:ANONYMOUS"]  # the test's producer writes the volume-usage topic
    config["volume_usage"] = {"freshness_seconds": 60, "missing_data_action": "PAUSE"}  # defaults: 1 MiB, 10,000
    try:
        running = start_proxy(config)
    except BaseException:
        broker.stop()
        raise
    try:
        yield running
    finally:
        try:
            running.stop()
        finally:
            broker.stop()


def test_an_over_limit_record_is_refused_and_a_record_at_the_limit_is_taken(proxy):
    ck_create_topic(proxy.bootstrap, VOLUME_TOPIC, 1)
    publish(proxy.bootstrap, snapshot(2, 95))  # past the hard limit (10 % free)
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_volume_state", state="PAUSE") == 1.0,
        20,
        "PAUSE from the first snapshot",
    )
    size_before = len(scrape(proxy))

    huge = snapshot(100_000, 1)  # every disk nearly empty: would lift the PAUSE if taken
    assert len(huge) > 6_000_000
    publish(proxy.bootstrap, huge)
    wait_until(
        lambda: (
            proxy.metric("kafka_quota_proxy_volume_bad_records_total", reason="too_large") == 1
            or proxy.metric("kafka_quota_proxy_volume_state", state="OPEN") == 1.0
        ),
        20,
        "the 100,000-volume record read",
    )
    assert proxy.metric("kafka_quota_proxy_volume_state", state="PAUSE") == 1.0, "the huge record was taken"
    assert proxy.metric("kafka_quota_proxy_volume_bad_records_total", reason="too_large") == 1
    assert proxy.metric("kafka_quota_proxy_volume_volumes") == 2
    assert abs(len(scrape(proxy)) - size_before) < 2_000  # before: about 32 MB, one series per volume

    at_limit = snapshot(10_000, 1)
    assert len(at_limit) < 1 << 20
    bystander = raw.connect(proxy.port)
    try:
        publish(proxy.bootstrap, at_limit)
        for _ in range(20):  # served while the record is read
            assert raw.exchange(bystander, METADATA, 12, topics=[]).brokers
        wait_until(lambda: proxy.metric("kafka_quota_proxy_volume_state", state="OPEN") == 1.0, 20, "OPEN")
    finally:
        bystander.close()
    assert proxy.metric("kafka_quota_proxy_volume_volumes") == 10_000
    text = scrape(proxy).decode()
    used = [line for line in text.splitlines() if line.startswith("kafka_quota_proxy_volume_used_bytes{")]
    assert len(used) == 10 and all('volume="/data/99' in line for line in used)  # the fullest: /data/9990...9999
    assert len(text) < size_before + 10_000
