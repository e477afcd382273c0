"""Python cost of one request and its response on the connection's pure path, without sockets.

Feeds 100,000 pairs of frames (a 1 KiB ListOffsets v5 request, which no handler decodes, and a small answer)
through :class:`proxy.connection.core.ConnectionCore` as the socket shell would (applying state only when something
holds), and prints microseconds per pair. Usage: ``python bench/pipeline_cost.py [--pairs N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from config.loader import parse_config  # noqa: E402
from proxy.apis import ConnectionScope, Session  # noqa: E402
from proxy.cluster.topics import Topics  # noqa: E402
from proxy.codec.header import encode_request_header, encode_response_header, frame  # noqa: E402
from proxy.connection.core import ConnectionCore  # noqa: E402
from proxy.enforcement.proxy_quotas import ProxyQuotas  # noqa: E402


class _ApiMetrics:
    def request(self, nbytes):
        pass

    def response(self, nbytes):
        pass

    def latency(self, seconds):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=100_000)
    n = parser.parse_args().pairs
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
            "listeners": [{"name": "P", "bind": "127.0.0.1:0"}],
            "metrics": {"bind": "127.0.0.1:0"},
        }
    )
    scope = ConnectionScope(None, Topics(), ProxyQuotas(config).home)
    out: list = []
    metrics = _ApiMetrics()
    core = ConnectionCore(
        scope,
        Session("P", "127.0.0.1"),
        max_request_bytes=1 << 20,
        max_response_bytes=1 << 20,
        max_inflight=200,
        write_client=out.append,
        write_broker=out.append,
        clock=time.monotonic_ns,
        api_metrics=lambda key: metrics,
    )
    requests = [memoryview(frame(encode_request_header(2, 5, i, "bench") + b"\x00" * 1024)) for i in range(n)]
    responses = [memoryview(frame(encode_response_header(2, 5, i) + b"\x00" * 40)) for i in range(n)]
    flow = core.flow
    started = time.perf_counter()
    for i in range(n):
        core.client_bytes(requests[i])
        if not flow.unhindered:
            core.step(time.monotonic_ns())
        core.broker_bytes(responses[i])
        if not flow.unhindered:
            core.step(time.monotonic_ns())
        if len(out) > 1000:
            out.clear()
    elapsed = time.perf_counter() - started
    print(f"{elapsed / n * 1e6:.2f} us per request + response ({n} pairs, ListOffsets v5, no quotas)")


if __name__ == "__main__":
    main()
