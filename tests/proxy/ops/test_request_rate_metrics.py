"""The request-rate quotas' metrics as Prometheus reads them: per client entity bounded by
quota.metrics.max.entities, per group bounded by the configuration."""

from prometheus_client import CollectorRegistry

from config.loader import parse_config
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.quota_metrics import QuotaMetricsCollector
from quota.primitives.clock import ManualClock
from quota.primitives.top import OTHER

BASE = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}


def proxy_registry(quotas_section, **settings):
    quotas = ProxyQuotas(parse_config({**BASE, "quotas": quotas_section, "settings": settings}), ManualClock(10**6))
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas))
    return quotas.requests, registry


def samples(registry, name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for m in registry.collect() for s in m.samples if s.name == name}


def test_client_entities_are_counted_and_their_labels_bounded():
    requests, registry = proxy_registry(
        [{"entity": {"user": "<default>"}, "request_rate": 2}], **{"quota.metrics.max.entities": 5}
    )
    for _ in range(21):
        requests.record_client("alice", "rotating")
    for i in range(40):
        requests.record_client(f"user-{i}", "c")
    labels = {"user": "alice", "client_id": "", "group": ""}  # a user quota: all its client ids in one entity
    assert registry.get_sample_value("kafka_quota_proxy_request_rate_requests_total", labels) == 21
    assert registry.get_sample_value("kafka_quota_proxy_request_rate_limit", labels) == 2
    assert registry.get_sample_value("kafka_quota_proxy_request_rate_rate", labels) == 2.1  # 21 over 10 s
    assert registry.get_sample_value("kafka_quota_proxy_request_rate_throttled_requests_total", labels) == 1
    users = samples(registry, "kafka_quota_proxy_request_rate_requests_total", "user")
    assert len(users) == 5 and OTHER in users and sum(users.values()) == 61  # nothing lost in the sum


def test_groups_with_an_entry_have_a_series_and_the_rest_are_summed_under_default():
    requests, registry = proxy_registry(
        [
            {"entity": {"group": "payments"}, "request_rate": 1},
            {"entity": {"group": "<default>"}, "request_rate": 10, "mode": "shadow"},
        ]
    )
    for _ in range(11):
        requests.record_group("payments")
    for i in range(30):
        requests.record_group(f"made-up-{i}")
    counted = samples(registry, "kafka_quota_proxy_request_rate_requests_total", "group")
    assert counted == {"payments": 11, "<default>": 30}
    assert (
        registry.get_sample_value(
            "kafka_quota_proxy_request_rate_limit", {"user": "", "client_id": "", "group": "<default>"}
        )
        == 10
    )
    throttle = registry.get_sample_value(
        "kafka_quota_proxy_request_rate_throttle_time_seconds_total", {"user": "", "client_id": "", "group": "payments"}
    )
    assert throttle == 1.0  # 11 at 1/s over 10 s: (1.1 - 1) / 1 x 10 s
