"""Prometheus metrics of one proxy instance, names prefixed ``kafka_quota_proxy_``.

Each proxy owns its registry (tests run several proxies in one process). Label children used on the hot path
are resolved once and cached, and a request is recorded by adding to their values directly (:class:`ApiMetrics`):
a dict lookup and a few attribute updates, no lock and no call into prometheus-client per request.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from proxy.codec.apis import API_NAMES, api_name

PREFIX = "kafka_quota_proxy"

# Request latency buckets (seconds): proxied Kafka requests span sub-millisecond produces to long-polling fetches.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            f"{PREFIX}_requests", "Requests received from clients, by listener and Kafka API.", ["listener", "api"], registry=r
        )
        self.request_bytes = Counter(
            f"{PREFIX}_request_bytes", "Bytes of request frames received from clients (size prefix included).",
            ["listener", "api"], registry=r,
        )
        self.response_bytes = Counter(
            f"{PREFIX}_response_bytes", "Bytes of response frames sent to clients (size prefix included).",
            ["listener", "api"], registry=r,
        )
        self.active_connections = Gauge(
            f"{PREFIX}_active_connections", "Client connections currently open.", ["listener"], registry=r
        )
        self.connections_accepted = Counter(
            f"{PREFIX}_connections_accepted", "Client connections accepted.", ["listener"], registry=r
        )
        self.connections_closed = Counter(
            f"{PREFIX}_connections_closed", "Client connections closed, by reason.", ["listener", "reason"], registry=r
        )
        self.frame_errors = Counter(
            f"{PREFIX}_frame_errors",
            "Malformed or oversized frames; each closes its connection. direction is request (from a client) or response (from the broker).",
            ["listener", "direction"], registry=r,
        )
        self.upstream_errors = Counter(
            f"{PREFIX}_upstream_errors", "Failures talking to the broker, by kind (connect, lost, timeout).",
            ["listener", "kind"], registry=r,
        )
        self.upstream_ready = Gauge(
            f"{PREFIX}_upstream_ready", "1 when the broker was reachable at the last check, else 0.", registry=r
        )
        self.ready = Gauge(
            f"{PREFIX}_ready", "1 while /readyz answers 200 (broker reachable, config topic read once, every broker "
            "port open in cluster mode, not shutting down), else 0; read when scraped.", registry=r
        )
        self.request_latency = Histogram(
            f"{PREFIX}_request_latency_seconds",
            "Time from a request being read from the client to its response being written back, by Kafka API.",
            ["listener", "api"], buckets=LATENCY_BUCKETS, registry=r,
        )
        self.inflight_max_requests = Gauge(
            f"{PREFIX}_connection_inflight_max_requests",
            "The in-flight bound: requests one client connection may have awaiting an answer "
            "(connections.max.inflight.requests).", registry=r,
        )
        self.buffered_response_max_bytes = Gauge(
            f"{PREFIX}_connection_buffered_response_max_bytes",
            "The in-flight bound on response bytes a client has not taken (connections.max.buffered.response.bytes).",
            registry=r,
        )
        self.producer_ids_held_bytes = Gauge(
            f"{PREFIX}_producer_ids_held_bytes",
            "Bytes of Produce requests held in this proxy process for their new producer ids (KIP-936 hold), "
            "at most max.held.request.bytes; read when scraped.", registry=r,
        )
        self.producer_ids_held_max_bytes = Gauge(
            f"{PREFIX}_producer_ids_held_max_bytes",
            "The bound on held Produce bytes in this process (max.held.request.bytes).", registry=r,
        )
        self.spliced_bytes = Counter(
            f"{PREFIX}_spliced_bytes", "Bytes of streamed frames moved from socket to socket in the kernel (splice(2), "
            "connections.splice) instead of being copied through the proxy, by listener and direction (request: "
            "client to broker; response: broker to client); the rest of request_bytes and response_bytes was copied.",
            ["listener", "direction"], registry=r,
        )
        self.fd_exhausted = Counter(
            f"{PREFIX}_fd_exhausted", "Broker connections that could not be opened because the proxy ran out of file "
            "descriptors (EMFILE/ENFILE); the client is closed, the broker is not blamed.", ["listener"], registry=r,
        )
        self.volume_publisher_connected = Gauge(
            f"{PREFIX}_volume_publisher_connected",
            "1 while the volume-usage publisher's last publication succeeded.", registry=r,
        )
        self.volume_publish_errors = Counter(
            f"{PREFIX}_volume_publish_errors", "Volume-usage snapshots that could not be published.", registry=r,
        )
        self.inflight_bound_reached = Counter(
            f"{PREFIX}_connection_inflight_bound_reached",
            "Times a client connection reached its in-flight bound (requests or unsent response bytes) and its "
            "reading stopped.", ["listener"], registry=r,
        )
        self.inflight_bound_seconds = Counter(
            f"{PREFIX}_connection_inflight_bound_seconds",
            "Seconds client connections spent at their in-flight bound, summed over connections.",
            ["listener"], registry=r,
        )
        self.usage_log_records = Counter(
            f"{PREFIX}_usage_log_records", "Usage-log records written.", registry=r,
        )
        self.usage_log_dropped = Counter(
            f"{PREFIX}_usage_log_dropped_records", "Usage-log records dropped: the writer fell behind or the disk "
            "refused a write (full, read-only); the proxy goes on.", registry=r,
        )
        self.internal_topic_writes_refused = Counter(
            f"{PREFIX}_internal_topic_writes_refused", "Writes of the proxy's internal topics refused "
            "(TOPIC_AUTHORIZATION_FAILED) because the principal is not in admin_principals and the connection is not "
            "the proxy's own, by topic and API.", ["topic", "api"], registry=r,
        )
        self.controller_mutation_partitions_unknown = Counter(
            f"{PREFIX}_controller_mutation_partitions_unknown", "Topics a CreateTopics v4 created with num_partitions "
            "-1 whose partition count the proxy could not look up: the controller mutation quota charged its "
            "fallback (the learnt default, else 1).", registry=r,
        )
        self._per_api: dict[tuple[str, int], ApiMetrics] = {}

    def api(self, listener: str, api_key: int) -> "ApiMetrics":
        key = (listener, api_key)
        found = self._per_api.get(key)
        if found is None:
            name = api_name(api_key) if api_key in API_NAMES else "Unknown"  # bounded label set
            found = self._per_api.get((listener, name))  # unknown API keys share one set of children
            if found is None:
                found = self._per_api[(listener, name)] = ApiMetrics(
                    self.requests.labels(listener, name),
                    self.request_bytes.labels(listener, name),
                    self.response_bytes.labels(listener, name),
                    self.request_latency.labels(listener, name),
                )
            self._per_api[key] = found
        return found


class _Value:
    """The value of a metric child, written without a lock by one thread (the event loop's, the only one recording
    requests) and read whole by a scrape from any thread: what prometheus-client's own value does, less the lock."""

    __slots__ = ("value",)

    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def inc(self, amount: float) -> None:
        self.value += amount

    def set(self, value: float, timestamp=None) -> None:
        self.value = value

    def get(self) -> float:
        return self.value

    def set_exemplar(self, exemplar) -> None:
        pass

    def get_exemplar(self):
        return None


def _unlocked(child, attribute: str = "_value") -> _Value:
    """Give ``child`` (a Counter child, or a Histogram child's ``_sum``) a :class:`_Value` in place of its own,
    carrying over what it counted; return it. The child still exposes it, so a scrape reads the exact count."""
    value = _Value(getattr(child, attribute).get())
    setattr(child, attribute, value)
    return value


class ApiMetrics:
    """The label children for one (listener, API): what the hot path touches, once per request and per response.

    Recording adds to the children's values directly (``value += n``, no lock, no call into prometheus-client per
    request): a request, its bytes, its response's bytes and its latency cost a few attribute updates, and /metrics
    shows them exactly, at once. prometheus-client's internals used here (a child's ``_value``, a histogram's
    ``_sum``, ``_buckets`` and ``_upper_bounds``) are checked by tests/proxy/test_api_metrics.py."""

    __slots__ = ("_requests", "_request_bytes", "_response_bytes", "_latency_sum", "_latency_buckets", "_bounds")

    def __init__(self, requests, request_bytes, response_bytes, latency) -> None:
        self._requests = _unlocked(requests)
        self._request_bytes = _unlocked(request_bytes)
        self._response_bytes = _unlocked(response_bytes)
        self._latency_sum = _unlocked(latency, "_sum")
        buckets = latency._buckets
        buckets[:] = [_Value(bucket.get()) for bucket in buckets]
        self._latency_buckets = tuple(buckets)
        self._bounds = tuple(latency._upper_bounds)  # ascending, +Inf last

    def request(self, nbytes: int) -> None:
        """A request frame of ``nbytes`` (size prefix included) was read from the client."""
        self._requests.value += 1
        self._request_bytes.value += nbytes

    def response(self, nbytes: int) -> None:
        """A response frame of ``nbytes`` goes to the client."""
        self._response_bytes.value += nbytes

    def latency(self, seconds: float) -> None:
        """A request was answered ``seconds`` after it was read: as ``Histogram.observe`` (the first bucket whose
        bound is at least ``seconds``)."""
        self._latency_sum.value += seconds
        self._latency_buckets[bisect_left(self._bounds, seconds)].value += 1
