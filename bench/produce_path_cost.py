"""Python cost of one small Produce request and its response on the connection's pure path (issue 25), per tree.

Like ``bench/pipeline_cost.py`` but on the path the requests/s ceiling of ``bench/workers.py`` takes: Produce v9
requests of one 100-byte record (a v2 record batch with a producer id), acks=1, client id ``bench`` under a
``producer_byte_rate`` far above what is sent (so each request is parsed to its producer id, its quota recorded
and decided), the proxy's real per-API metrics, fed in bursts of ``--burst`` requests then their responses, as a
pipelining producer's reads bring them, through :class:`proxy.connection.core.ConnectionCore`; writes go to a list.
No sockets, so what this measures is the Python cost alone (system calls are ``bench/small_produce_cost.py``'s).

``--trees old=/tmp/base,new=.``: runs each tree in its own process ``--repeat`` times, alternating, and prints each
tree's best and median microseconds per request + response. Usage:
``python bench/produce_path_cost.py [--trees old=DIR,new=DIR] [--pairs N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_message_batch() -> bytes:
    """A v2 record batch of one 100-byte record with producer id 1000 (an idempotent producer's), uncompressed."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    batch = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=1000,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    batch.append(0, timestamp=None, key=None, value=b"s" * 100, headers=[])
    return bytes(batch.build())


def one_run(pairs: int, burst: int) -> float:
    """Microseconds per request + response with the tree on sys.path (run in a process of its own)."""
    from config.loader import parse_config
    from proxy.apis import ConnectionScope, Session
    from proxy.cluster.topics import Topics
    from proxy.codec.header import encode_request_header, encode_response_header, frame
    from proxy.codec.messages import encode_request, encode_response, new_request, new_response
    from proxy.connection.core import ConnectionCore
    from proxy.enforcement.proxy_quotas import ProxyQuotas
    from proxy.ops.metrics import ProxyMetrics

    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
            "listeners": [{"name": "P", "bind": "127.0.0.1:0"}],
            "metrics": {"bind": "127.0.0.1:0"},
            "quotas": [{"entity": {"client-id": "bench"}, "producer_byte_rate": 10**12}],
        }
    )
    scope = ConnectionScope(None, Topics(), ProxyQuotas(config).home)
    metrics = ProxyMetrics()
    out: list = []
    core = ConnectionCore(
        scope,
        Session("P", "127.0.0.1"),
        max_request_bytes=1 << 20,
        max_response_bytes=1 << 20,
        max_inflight=1000,
        write_client=out.append,
        write_broker=out.append,
        clock=time.monotonic_ns,
        api_metrics=lambda key: metrics.api("P", key),
    )
    records = one_message_batch()
    body = encode_request(
        0,
        9,
        new_request(
            0,
            9,
            transactional_id=None,
            acks=1,
            timeout_ms=30000,
            topic_data=[{"name": "small", "partition_data": [{"index": 0, "records": records}]}],
        ),
    )
    answer = encode_response(
        0,
        9,
        new_response(
            0,
            9,
            responses=[{"name": "small", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 0}]}],
        ),
    )
    rounds = pairs // burst
    requests = [
        memoryview(b"".join(frame(encode_request_header(0, 9, r * burst + i, "bench") + body) for i in range(burst)))
        for r in range(rounds)
    ]
    responses = [
        memoryview(b"".join(frame(encode_response_header(0, 9, r * burst + i) + answer) for i in range(burst)))
        for r in range(rounds)
    ]
    flow = core.flow
    started = time.process_time()
    for r in range(rounds):
        core.client_bytes(requests[r])
        if not flow.unhindered:
            core.step(time.monotonic_ns())
        core.broker_bytes(responses[r])
        if not flow.unhindered:
            core.step(time.monotonic_ns())
        out.clear()
    elapsed = time.process_time() - started
    assert (
        metrics.registry.get_sample_value("kafka_quota_proxy_requests_total", {"listener": "P", "api": "Produce"})
        == rounds * burst
    )
    return elapsed / (rounds * burst) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=f"new={HERE}", help="name=DIR pairs, comma-separated")
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=40, help="requests per read (then as many responses)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one run, this tree
    args = parser.parse_args()
    if args.one:
        print(one_run(args.pairs, args.burst))
        return
    trees = [tuple(item.split("=", 1)) for item in args.trees.split(",")]
    print(
        f"{args.pairs} Produce v9 pairs (100 B, acks=1, byte-rate quota), {args.burst} per read, "
        f"{args.repeat} runs per tree; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    figures: dict[str, list[float]] = {name: [] for name, _ in trees}
    for r in range(args.repeat):
        for name, tree in trees if r % 2 == 0 else list(reversed(trees)):
            answer = subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--one",
                    "--pairs",
                    str(args.pairs),
                    "--burst",
                    str(args.burst),
                ],
                cwd=tree,
                env={**os.environ, "PYTHONPATH": tree},
                capture_output=True,
                text=True,
                check=True,
            )
            figures[name].append(float(answer.stdout.strip().splitlines()[-1]))
    for name, _ in trees:
        runs = figures[name]
        print(
            f"  {name}: best {min(runs):.2f} us, median {statistics.median(runs):.2f} us per request + response "
            f"({', '.join(f'{x:.2f}' for x in runs)})"
        )
    if len(trees) == 2:
        (a, _), (b, _) = trees
        print(
            f"  {b} / {a}: best {min(figures[b]) / min(figures[a]):.2f} x, median "
            f"{statistics.median(figures[b]) / statistics.median(figures[a]):.2f} x; load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
