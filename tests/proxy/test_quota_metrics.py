"""Per-entity quota metrics as Prometheus reads them, with bounded label cardinality."""

from prometheus_client import CollectorRegistry

from config.loader import parse_config
from proxy.quotas import OTHER, ByteRateQuotas, QuotaMetricsCollector
from quota.clock import ManualClock


def registry_for(max_entities):
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}],
                           "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": 100}],
                           "settings": {"quota.metrics.max.entities": max_entities}})
    quotas = ByteRateQuotas(config, ManualClock(1_000_000))
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas))
    return quotas, registry


def test_entity_metrics_follow_kafka_tags():
    quotas, registry = registry_for(10)
    for _ in range(3):
        quotas.produce.record_and_decide("alice", "app-1", 600)
    labels = {"quota": "producer_byte_rate", "user": "alice", "client_id": ""}  # a user quota: client-id not a tag
    assert registry.get_sample_value("kafka_quota_proxy_quota_bytes_total", labels) == 1800
    assert registry.get_sample_value("kafka_quota_proxy_quota_limit", labels) == 100
    assert registry.get_sample_value("kafka_quota_proxy_quota_byte_rate", labels) == 180  # 1800 B over 10 s
    assert registry.get_sample_value("kafka_quota_proxy_quota_throttled_responses_total", labels) == 2
    assert registry.get_sample_value("kafka_quota_proxy_quota_throttle_time_max_ms", labels) > 0


def test_label_cardinality_is_bounded():
    quotas, registry = registry_for(5)
    for i in range(50):
        quotas.produce.record_and_decide(f"user-{i}", "c", 10 + i)
    users = {s.labels["user"] for m in registry.collect() for s in m.samples if m.name == "kafka_quota_proxy_quota_bytes"}
    assert len(users) == 5 and OTHER in users
    total = sum(s.value for m in registry.collect() for s in m.samples if s.name == "kafka_quota_proxy_quota_bytes_total")
    assert total == sum(10 + i for i in range(50))  # nothing lost in the aggregation
