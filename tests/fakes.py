"""Stand-ins shared by tests that drive a connection core on bytes."""

from __future__ import annotations


class NullMetric:
    """A counter or histogram child that records nothing."""

    def inc(self, n=1):
        pass

    def observe(self, v):
        pass


class NullApiMetrics:
    requests = request_bytes = response_bytes = latency = NullMetric()


NULL_API_METRICS = NullApiMetrics()
