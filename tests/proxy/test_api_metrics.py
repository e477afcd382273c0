"""The per-API request metrics the hot path records (proxy.ops.metrics.ApiMetrics): exact when scraped, and the
same exposition as prometheus-client's own inc() and observe() would give (this checks the internals they use)."""

from __future__ import annotations

from prometheus_client import generate_latest

from proxy.ops.metrics import LATENCY_BUCKETS, ProxyMetrics

PRODUCE = {"listener": "P", "api": "Produce"}

# Below, at and above bucket bounds, zero and past the last bound (+Inf bucket).
LATENCIES = [0.0, 0.00005, 0.0001, 0.00010001, 0.0003, 0.001, 0.7, 5, 10, 29.9, 30, 31, 1e6] + list(LATENCY_BUCKETS)


def _exposition(metrics: ProxyMetrics) -> list[str]:
    """The per-API families as /metrics shows them, without the creation timestamps."""
    text = generate_latest(metrics.registry).decode()
    names = ("kafka_quota_proxy_requests", "kafka_quota_proxy_request_bytes", "kafka_quota_proxy_response_bytes",
             "kafka_quota_proxy_request_latency_seconds")
    return [line for line in text.splitlines()
            if line.startswith(names) and "_created" not in line]


def test_recorded_as_prometheus_client_records_them():
    fast, reference = ProxyMetrics(), ProxyMetrics()
    api = fast.api("P", 0)
    requests = reference.requests.labels("P", "Produce")
    request_bytes = reference.request_bytes.labels("P", "Produce")
    response_bytes = reference.response_bytes.labels("P", "Produce")
    latency = reference.request_latency.labels("P", "Produce")
    for i, seconds in enumerate(LATENCIES):
        api.request(100 + i)
        api.response(40 + i)
        api.latency(seconds)
        requests.inc()
        request_bytes.inc(100 + i)
        response_bytes.inc(40 + i)
        latency.observe(seconds)
    assert _exposition(fast) == _exposition(reference)
    assert fast.registry.get_sample_value("kafka_quota_proxy_requests_total", PRODUCE) == len(LATENCIES)
    assert fast.registry.get_sample_value("kafka_quota_proxy_request_latency_seconds_count", PRODUCE) == len(LATENCIES)
    assert fast.registry.get_sample_value("kafka_quota_proxy_request_latency_seconds_bucket",
                                          {**PRODUCE, "le": "0.0001"}) == 4  # 0, 0.00005, 0.0001 twice


def test_counts_before_and_beside_the_hot_path_are_kept():
    metrics = ProxyMetrics()
    child = metrics.requests.labels("P", "Produce")
    child.inc(5)  # before the connection path took the child over
    metrics.request_latency.labels("P", "Produce").observe(0.002)
    api = metrics.api("P", 0)
    api.request(10)
    child.inc()  # through prometheus-client's own inc, after
    api.latency(0.002)
    get = metrics.registry.get_sample_value
    assert get("kafka_quota_proxy_requests_total", PRODUCE) == 7
    assert get("kafka_quota_proxy_request_bytes_total", PRODUCE) == 10
    assert get("kafka_quota_proxy_request_latency_seconds_count", PRODUCE) == 2
    assert get("kafka_quota_proxy_request_latency_seconds_bucket", {**PRODUCE, "le": "0.0025"}) == 2
    assert get("kafka_quota_proxy_request_latency_seconds_sum", PRODUCE) == 0.004


def test_unknown_api_keys_share_one_series_and_lose_nothing():
    metrics = ProxyMetrics()
    first = metrics.api("P", 30000)
    first.request(8)
    second = metrics.api("P", 30001)
    second.request(9)
    first.request(10)
    assert metrics.api("P", 30000) is first
    unknown = {"listener": "P", "api": "Unknown"}
    assert metrics.registry.get_sample_value("kafka_quota_proxy_requests_total", unknown) == 3
    assert metrics.registry.get_sample_value("kafka_quota_proxy_request_bytes_total", unknown) == 27
