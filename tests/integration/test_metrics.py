"""What Prometheus scrapes from /metrics after real traffic."""

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import wait_until
from tests.integration import clients as c

pytestmark = pytest.mark.integration


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_after_traffic(sidecar):
    c.kp_create_topic(sidecar.bootstrap, "m", 1)
    c.kp_produce(sidecar.bootstrap, "m", 300)
    c.kp_consume(sidecar.bootstrap, "m", 300)
    m = scrape(sidecar.proxy.metrics_port)
    produce = (("api", "Produce"), ("listener", "PLAINTEXT"))
    assert m[("kafka_quota_proxy_requests_total", produce)] >= 1
    assert m[("kafka_quota_proxy_request_bytes_total", produce)] > 300 * 10
    assert m[("kafka_quota_proxy_response_bytes_total", (("api", "Fetch"), ("listener", "PLAINTEXT")))] > 300 * 10
    assert (
        m[("kafka_quota_proxy_request_latency_seconds_count", produce)]
        == m[("kafka_quota_proxy_requests_total", produce)]
    )
    accepted = m[("kafka_quota_proxy_connections_accepted_total", (("listener", "PLAINTEXT"),))]
    closed = sum(v for (name, labels), v in m.items() if name == "kafka_quota_proxy_connections_closed_total")
    active = m[("kafka_quota_proxy_active_connections", (("listener", "PLAINTEXT"),))]
    assert accepted >= 3 and accepted == closed + active
    assert m[("kafka_quota_proxy_upstream_ready", ())] == 1


def test_shadow_throttles_apart_and_a_deleted_entry_limit_follows_back():
    """A dynamic shadow entry over a producer, then deleted (tombstone on the config topic), against Tansu with
    kafka-python. While shadow: the producer is never throttled and /metrics says so (applied counters 0, the
    shadow ones count what would have been). Once deleted: ``quota_limit`` reports the YAML user quota that
    applies now, and nothing for the deleted entry's tags. The waits poll for the proxy to read the config
    topic (bounded, real seconds: the follower is a real consumer)."""
    from kafka import KafkaProducer

    from config.dynamic import entity_key
    from tests.harness import Tansu, free_port, proxy_config, start_proxy

    topic_name = "__kafka_quota_proxy_configs"
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(
        proxy_port, broker_port, quotas=[{"entity": {"user": "<default>"}, "producer_byte_rate": 10_000_000}]
    )
    config["admin_principals"] = ["User:ANONYMOUS"]  # the test's own writer may write the config topic
    config["dynamic_config"] = {"topic": topic_name}
    try:
        proxy = start_proxy(config)
    except BaseException:
        broker.stop()
        raise

    def described_now() -> dict:
        from tests.integration.quota_apis import described

        return described(proxy.bootstrap, {"user": None, "client-id": "kp-producer"})

    def wait_for(predicate, timeout: float = 10.0) -> None:
        wait_until(predicate, timeout, "the metric's value")

    pair = entity_key({"user": "<default>", "client-id": "kp-producer"})
    writer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="config-writer")
    try:
        writer.send(topic_name, key=pair, value=b'{"producer_byte_rate": 1000, "mode": "shadow"}').get(10)
        wait_for(lambda: described_now() == {"producer_byte_rate": 1000})
        c.kp_create_topic(proxy.bootstrap, "shadowed", 1)
        c.kp_produce(proxy.bootstrap, "shadowed", 3000)  # ~30 kB in well under a second: 1000 B/s is far exceeded
        m = scrape(proxy.metrics_port)
        entity = (("client_id", "kp-producer"), ("quota", "producer_byte_rate"), ("user", "ANONYMOUS"))
        assert m[("kafka_quota_proxy_quota_limit", entity)] == 1000
        assert m[("kafka_quota_proxy_quota_throttled_responses_total", entity)] == 0
        assert m[("kafka_quota_proxy_quota_throttle_time_seconds_total", entity)] == 0
        assert m[("kafka_quota_proxy_quota_throttle_time_max_seconds", entity)] == 0
        assert m[("kafka_quota_proxy_quota_entity_shadow_throttled_responses_total", entity)] > 0
        assert m[("kafka_quota_proxy_quota_shadow_throttles_total", (("quota", "producer_byte_rate"),))] > 0

        writer.send(topic_name, key=pair, value=None).get(10)  # the entry deleted
        wait_for(lambda: described_now() == {})
        m = scrape(proxy.metrics_port)
        assert ("kafka_quota_proxy_quota_limit", entity) not in m  # these tags carry no quota any more
        user = (("client_id", ""), ("quota", "producer_byte_rate"), ("user", "ANONYMOUS"))
        assert m[("kafka_quota_proxy_quota_limit", user)] == 10_000_000
    finally:
        writer.close(5)
        try:
            proxy.stop()
        finally:
            broker.stop()
