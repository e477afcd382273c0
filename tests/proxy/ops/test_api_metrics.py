"""The per-API request metrics the hot path records (proxy.ops.metrics.ApiMetrics): exact when scraped, and the
same exposition as prometheus-client's own inc() and observe() would give."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from proxy.ops.metrics import LATENCY_BUCKETS, ProxyMetrics

PRODUCE = {"listener": "P", "api": "Produce"}

# Below, at and above bucket bounds, zero and past the last bound (+Inf bucket).
LATENCIES = [0.0, 0.00005, 0.0001, 0.00010001, 0.0003, 0.001, 0.7, 5, 10, 29.9, 30, 31, 1e6] + list(LATENCY_BUCKETS)


def _exposition(registry: CollectorRegistry) -> list[str]:
    """The per-API families as /metrics shows them, without the creation timestamps."""
    text = generate_latest(registry).decode()
    names = (
        "kafka_quota_proxy_requests",
        "kafka_quota_proxy_request_bytes",
        "kafka_quota_proxy_response_bytes",
        "kafka_quota_proxy_request_latency_seconds",
    )
    return [line for line in text.splitlines() if line.startswith(names) and "_created" not in line]


def _reference():
    """prometheus-client's own Counter and Histogram children, named and labelled as the proxy's."""
    registry = CollectorRegistry()
    labels = ["listener", "api"]
    families = (
        Counter(
            "kafka_quota_proxy_requests",
            "Requests received from clients, by listener and Kafka API.",
            labels,
            registry=registry,
        ),
        Counter(
            "kafka_quota_proxy_request_bytes",
            "Bytes of request frames received from clients (size prefix included).",
            labels,
            registry=registry,
        ),
        Counter(
            "kafka_quota_proxy_response_bytes",
            "Bytes of response frames sent to clients (size prefix included).",
            labels,
            registry=registry,
        ),
        Histogram(
            "kafka_quota_proxy_request_latency_seconds",
            "Time from a request being read from the client to its response being written back, by Kafka API.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
    )
    return registry, [family.labels("P", "Produce") for family in families]


def test_recorded_as_prometheus_client_records_them():
    fast = ProxyMetrics()
    registry, (requests, request_bytes, response_bytes, latency) = _reference()
    api = fast.api("P", 0)
    for i, seconds in enumerate(LATENCIES):
        api.request(100 + i)
        api.answered(40 + i, seconds)
        requests.inc()
        request_bytes.inc(100 + i)
        response_bytes.inc(40 + i)
        latency.observe(seconds)
    assert _exposition(fast.registry) == _exposition(registry)
    assert fast.registry.get_sample_value("kafka_quota_proxy_requests_total", PRODUCE) == len(LATENCIES)
    assert fast.registry.get_sample_value("kafka_quota_proxy_request_latency_seconds_count", PRODUCE) == len(LATENCIES)
    assert (
        fast.registry.get_sample_value("kafka_quota_proxy_request_latency_seconds_bucket", {**PRODUCE, "le": "0.0001"})
        == 4
    )  # 0, 0.00005, 0.0001 twice
    assert fast.registry.get_sample_value("kafka_quota_proxy_requests_created", PRODUCE) is not None


def test_no_series_before_the_first_request():
    metrics = ProxyMetrics()
    assert metrics.registry.get_sample_value("kafka_quota_proxy_requests_total", PRODUCE) is None
    metrics.api("P", 0)
    assert metrics.registry.get_sample_value("kafka_quota_proxy_requests_total", PRODUCE) == 0


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


def test_inflight_bound_counted_as_prometheus_client_counts_them():
    """A connection's in-flight bound changes (proxy.connection.counted.Counted, per listener): the two counters
    exposed as prometheus-client's own Counter children would show them, and a listener not yet at its bound shows
    none, as a labelled Counter with no child."""
    from types import SimpleNamespace

    from proxy.connection.counted import Counted

    fast = ProxyMetrics()
    registry = CollectorRegistry()
    reached = Counter(
        "kafka_quota_proxy_connection_inflight_bound_reached",
        "Times a client connection reached its in-flight bound (requests or unsent response bytes): no new "
        "request starts until it is below it.",
        ["listener"],
        registry=registry,
    )
    seconds = Counter(
        "kafka_quota_proxy_connection_inflight_bound_seconds",
        "Seconds client connections spent at their in-flight bound, summed over connections.",
        ["listener"],
        registry=registry,
    )

    def shown(r: CollectorRegistry) -> list[str]:
        lines = generate_latest(r).decode().splitlines()
        return [line for line in lines if "_connection_inflight_bound" in line and "_created" not in line]

    assert shown(fast.registry) == shown(registry)  # no listener yet: the families, no samples
    connections = [Counted(SimpleNamespace(metrics=fast, name=name)) for name in ("P", "P", "Q")]
    for at, (conn, name) in enumerate(zip(connections * 3, ["P", "P", "Q"] * 3)):
        conn.bound_changed(at * 0.25)
        if conn.at_bound_since is None:  # left it: the time since it reached it
            seconds.labels(name).inc(0.25 * len(connections))
        else:
            reached.labels(name).inc()
    assert shown(fast.registry) == shown(registry)
    assert (
        fast.registry.get_sample_value("kafka_quota_proxy_connection_inflight_bound_reached_total", {"listener": "P"})
        == 4
    )
    assert (
        fast.registry.get_sample_value("kafka_quota_proxy_connection_inflight_bound_seconds_total", {"listener": "Q"})
        == 0.75
    )
    assert fast.registry.get_sample_value(
        "kafka_quota_proxy_connection_inflight_bound_reached_created", {"listener": "Q"}
    )
