"""Prometheus metrics of one proxy instance, names prefixed ``kafka_quota_proxy_``.

Each proxy owns its registry (tests run several proxies in one process). The per-API counts of the hot path are
plain attributes (:class:`ApiMetrics`: a dict lookup and a few attribute updates per request, no lock and no call
into prometheus-client), exposed by a collector through prometheus-client's public API.
"""

from __future__ import annotations

import time
from bisect import bisect_left

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from proxy.codec.apis import API_NAMES, api_name

PREFIX = "kafka_quota_proxy"

# Request latency buckets (seconds): proxied Kafka requests span sub-millisecond produces to long-polling fetches.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
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
            ["listener", "direction"],
            registry=r,
        )
        self.upstream_errors = Counter(
            f"{PREFIX}_upstream_errors",
            "Failures talking to the broker, by kind (connect, lost, timeout).",
            ["listener", "kind"],
            registry=r,
        )
        self.upstream_ready = Gauge(
            f"{PREFIX}_upstream_ready", "1 when the broker was reachable at the last check, else 0.", registry=r
        )
        self.ready = Gauge(
            f"{PREFIX}_ready",
            "1 while /readyz answers 200 (broker reachable, config topic read once, every broker "
            "port open in cluster mode, not shutting down), else 0; read when scraped.",
            registry=r,
        )
        self.inflight_max_requests = Gauge(
            f"{PREFIX}_connection_inflight_max_requests",
            "The in-flight bound: requests one client connection may have awaiting an answer "
            "(connections.max.inflight.requests).",
            registry=r,
        )
        self.buffered_response_max_bytes = Gauge(
            f"{PREFIX}_connection_buffered_response_max_bytes",
            "The in-flight bound on response bytes a client has not taken (connections.max.buffered.response.bytes).",
            registry=r,
        )
        self.producer_ids_held_bytes = Gauge(
            f"{PREFIX}_producer_ids_held_bytes",
            "Bytes of Produce requests held in this proxy process for their new producer ids (KIP-936 hold), "
            "at most max.held.request.bytes; read when scraped.",
            registry=r,
        )
        self.producer_ids_held_max_bytes = Gauge(
            f"{PREFIX}_producer_ids_held_max_bytes",
            "The bound on held Produce bytes in this process (max.held.request.bytes).",
            registry=r,
        )
        self.spliced_bytes = Counter(
            f"{PREFIX}_spliced_bytes",
            "Bytes of streamed frames moved from socket to socket in the kernel (splice(2), "
            "connections.splice) instead of being copied through the proxy, by listener and direction (request: "
            "client to broker; response: broker to client); the rest of request_bytes and response_bytes was copied.",
            ["listener", "direction"],
            registry=r,
        )
        self.fd_exhausted = Counter(
            f"{PREFIX}_fd_exhausted",
            "Broker connections that could not be opened because the proxy ran out of file "
            "descriptors (EMFILE/ENFILE); the client is closed, the broker is not blamed.",
            ["listener"],
            registry=r,
        )
        self.volume_publisher_connected = Gauge(
            f"{PREFIX}_volume_publisher_connected",
            "1 while the volume-usage publisher's last publication succeeded.",
            registry=r,
        )
        self.volume_publish_errors = Counter(
            f"{PREFIX}_volume_publish_errors",
            "Volume-usage snapshots that could not be published.",
            registry=r,
        )
        self.usage_log_records = Counter(
            f"{PREFIX}_usage_log_records",
            "Usage-log records written.",
            registry=r,
        )
        self.usage_log_dropped = Counter(
            f"{PREFIX}_usage_log_dropped_records",
            "Usage-log records dropped: the writer fell behind or the disk "
            "refused a write (full, read-only); the proxy goes on.",
            registry=r,
        )
        self.internal_topic_writes_refused = Counter(
            f"{PREFIX}_internal_topic_writes_refused",
            "Writes of the proxy's internal topics refused "
            "(TOPIC_AUTHORIZATION_FAILED) because the principal is not in admin_principals and the connection is not "
            "the proxy's own, by topic and API.",
            ["topic", "api"],
            registry=r,
        )
        self.controller_mutation_partitions_unknown = Counter(
            f"{PREFIX}_controller_mutation_partitions_unknown",
            "Topics a CreateTopics v4 created with num_partitions "
            "-1 whose partition count the proxy could not look up: the controller mutation quota charged its "
            "fallback (the learnt default, else 1).",
            registry=r,
        )
        self.delegation_token_logins_refused = Counter(
            f"{PREFIX}_delegation_token_logins_refused",
            "SCRAM logins with a delegation token (tokenauth=true) the "
            "proxy refused with SASL_AUTHENTICATION_FAILED because it could not learn the token's owner (the "
            "principal Kafka authenticates and its quotas charge).",
            registry=r,
        )
        self.delegation_token_lookups = Counter(
            f"{PREFIX}_delegation_token_lookups",
            "DescribeDelegationToken requests the proxy sent to learn delegation "
            "tokens' owners, by result: answered, or failed (no broker answered, or an error).",
            ["result"],
            registry=r,
        )
        # (listener, API key) and, for the API keys the codec does not name, (listener, "Unknown")
        self._per_api: dict[tuple[str, int | str], ApiMetrics] = {}
        self._per_api_collector = PerApiCollector()
        r.register(self._per_api_collector)
        self._bound_collector = InflightBoundCollector()
        r.register(self._bound_collector)

    def inflight_bound(self, listener: str) -> BoundCounts:
        """The listener's in-flight bound counts (``connection_inflight_bound_reached``,
        ``connection_inflight_bound_seconds``), which each connection looks up once: a producer with as many requests
        in flight as the bound reaches it and leaves it at nearly every request."""
        return self._bound_collector.of(listener)

    def api(self, listener: str, api_key: int) -> ApiMetrics:
        key = (listener, api_key)
        found = self._per_api.get(key)
        if found is None:
            name = api_name(api_key) if api_key in API_NAMES else "Unknown"  # bounded label set
            found = self._per_api.get((listener, name))  # unknown API keys share one set of children
            if found is None:
                found = self._per_api[(listener, name)] = ApiMetrics()
                self._per_api_collector.add((listener, name), found)
            self._per_api[key] = found
        return found


class ApiMetrics:
    """What one (listener, API) counted: the hot path adds to plain attributes, once per request and per response
    (no lock, no call into prometheus-client), and :class:`PerApiCollector` reads them when /metrics is scraped.
    One thread (the event loop's) writes; a scrape from another thread reads a float at a time, as
    prometheus-client's own values are read."""

    __slots__ = ("requests", "request_bytes", "response_bytes", "latency_sum", "latency_counts", "created")

    def __init__(self) -> None:
        self.created = time.time()  # the series' _created samples, as prometheus-client's children give them
        self.requests = 0
        self.request_bytes = 0
        self.response_bytes = 0
        self.latency_sum = 0.0
        self.latency_counts = [0] * (len(LATENCY_BUCKETS) + 1)  # per bucket (not cumulative), +Inf last

    def request(self, nbytes: int) -> None:
        """A request frame of ``nbytes`` (size prefix included) was read from the client."""
        self.requests += 1
        self.request_bytes += nbytes

    def answered(self, nbytes: int, seconds: float) -> None:
        """A response frame of ``nbytes`` went to the client ``seconds`` after its request was read (once per
        response): its bytes counted, its latency observed as ``Histogram.observe`` does (the first bucket whose
        bound is at least ``seconds``)."""
        self.response_bytes += nbytes
        self.latency_sum += seconds
        self.latency_counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1


class BoundCounts:
    """One listener's connections at their in-flight bound: how often one reached it, and the seconds they spent
    there (summed). Plain attributes, as :class:`ApiMetrics`' are: added to by the event loop's thread, read by
    :class:`InflightBoundCollector` when /metrics is scraped."""

    __slots__ = ("reached", "seconds", "created")

    def __init__(self) -> None:
        self.created = time.time()
        self.reached = 0
        self.seconds = 0.0


class InflightBoundCollector(Collector):
    """Exposes every listener's :class:`BoundCounts` as the two counters ``connection_inflight_bound_reached`` and
    ``connection_inflight_bound_seconds``, by listener, as Counter children would show them."""

    def __init__(self) -> None:
        self._listeners: dict[str, BoundCounts] = {}

    def of(self, listener: str) -> BoundCounts:
        found = self._listeners.get(listener)
        if found is None:
            found = self._listeners[listener] = BoundCounts()
        return found

    def describe(self):
        return self._families(())

    def collect(self):
        return self._families(list(self._listeners.items()))

    def _families(self, listeners):
        reached = CounterMetricFamily(
            f"{PREFIX}_connection_inflight_bound_reached",
            "Times a client connection reached its in-flight bound (requests or unsent response bytes): no new "
            "request starts until it is below it.",
            labels=["listener"],
        )
        seconds = CounterMetricFamily(
            f"{PREFIX}_connection_inflight_bound_seconds",
            "Seconds client connections spent at their in-flight bound, summed over connections.",
            labels=["listener"],
        )
        for listener, counts in listeners:
            reached.add_metric([listener], counts.reached, created=counts.created)
            seconds.add_metric([listener], counts.seconds, created=counts.created)
        return [reached, seconds]


_BUCKET_LABELS = tuple(floatToGoString(bound) for bound in LATENCY_BUCKETS) + ("+Inf",)


class PerApiCollector(Collector):
    """Exposes every :class:`ApiMetrics` as the four per-API families, through prometheus-client's public collector
    API: ``requests``, ``request_bytes`` and ``response_bytes`` counters and the ``request_latency_seconds``
    histogram, by listener and API, exactly as Counter and Histogram children would show them."""

    def __init__(self) -> None:
        self._children: dict[tuple[str, str], ApiMetrics] = {}

    def add(self, labels: tuple[str, str], child: ApiMetrics) -> None:
        self._children[labels] = child

    def describe(self):
        return self._families(())

    def collect(self):
        return self._families(list(self._children.items()))

    def _families(self, children):
        labels = ["listener", "api"]
        requests = CounterMetricFamily(
            f"{PREFIX}_requests", "Requests received from clients, by listener and Kafka API.", labels=labels
        )
        request_bytes = CounterMetricFamily(
            f"{PREFIX}_request_bytes",
            "Bytes of request frames received from clients (size prefix included).",
            labels=labels,
        )
        response_bytes = CounterMetricFamily(
            f"{PREFIX}_response_bytes",
            "Bytes of response frames sent to clients (size prefix included).",
            labels=labels,
        )
        latency = HistogramMetricFamily(
            f"{PREFIX}_request_latency_seconds",
            "Time from a request being read from the client to its response being written back, by Kafka API.",
            labels=labels,
        )
        for key, child in children:
            requests.add_metric(key, child.requests, created=child.created)
            request_bytes.add_metric(key, child.request_bytes, created=child.created)
            response_bytes.add_metric(key, child.response_bytes, created=child.created)
            cumulative, buckets = 0, []
            for label, count in zip(_BUCKET_LABELS, list(child.latency_counts)):
                cumulative += count
                buckets.append((label, cumulative))
            latency.add_metric(key, buckets, child.latency_sum)
        return [requests, request_bytes, response_bytes, latency]
