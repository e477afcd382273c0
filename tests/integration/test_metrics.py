"""What Prometheus scrapes from /metrics after real traffic."""

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

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
    assert m[("kafka_quota_proxy_request_latency_seconds_count", produce)] == m[("kafka_quota_proxy_requests_total", produce)]
    accepted = m[("kafka_quota_proxy_connections_accepted_total", (("listener", "PLAINTEXT"),))]
    closed = sum(v for (name, labels), v in m.items() if name == "kafka_quota_proxy_connections_closed_total")
    active = m[("kafka_quota_proxy_active_connections", (("listener", "PLAINTEXT"),))]
    assert accepted >= 3 and accepted == closed + active
    assert m[("kafka_quota_proxy_upstream_ready", ())] == 1
