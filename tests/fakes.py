"""Stand-ins shared by tests that drive a connection core on bytes."""

from __future__ import annotations


class NullApiMetrics:
    """A :class:`proxy.ops.metrics.ApiMetrics` that records nothing."""

    def request(self, nbytes):
        pass

    def response(self, nbytes):
        pass

    def latency(self, seconds):
        pass


NULL_API_METRICS = NullApiMetrics()
