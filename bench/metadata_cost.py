"""The proxy's own Python cost per Metadata answer, by how many topics the answer names (issue 44, T7).

Feeds pairs of frames (a Metadata v12 request for every topic, and its answer naming ``--topics`` topics of 3
partitions each) through :class:`proxy.connection.core.ConnectionCore` as the socket shell would, in sidecar mode and
in cluster mode (brokers rewritten to the proxy's ports), and prints microseconds of CPU (``time.process_time``) per
pair and the ratio to a ListOffsets pair (which no handler decodes) measured in the same run. ``--tree DIR`` runs
another source tree's core (``git archive <commit> | tar -x -C DIR``): before, every answer was decoded whole to
learn of every topic, so its cost grew with the topics; now it passes as the broker wrote it (sidecar) or only its
head is rewritten (cluster).

Usage: ``python bench/metadata_cost.py [--tree DIR] [--topics 10 1000 10000] [--pairs 200]``. Under callgrind
(instructions, steadier than time on a busy machine): ``valgrind --tool=callgrind --callgrind-out-file=/dev/null
python bench/metadata_cost.py --topics 10000 --pairs 20`` and compare the totals of two trees.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid


def run(tree: str, topic_counts: list[int], pairs: int) -> None:
    sys.path.insert(0, tree)
    from config.loader import parse_config
    from proxy.apis import ConnectionScope, Session
    from proxy.cluster.broker_ports import BrokerPorts
    from proxy.cluster.topics import Topics
    from proxy.codec.apis import METADATA
    from proxy.codec.header import encode_request_header, encode_response_header, frame
    from proxy.codec.messages import encode_request, encode_response, new_request, new_response
    from proxy.connection.core import ConnectionCore
    from proxy.enforcement.proxy_quotas import ProxyQuotas
    from tests.fakes import NULL_API_METRICS as metrics

    config = parse_config(
        {"upstream": {"bootstrap_servers": ["127.0.0.1:9092"]}, "listeners": [{"name": "P", "bind": "127.0.0.1:0"}]}
    )

    def core(cluster: bool) -> tuple:
        ports = BrokerPorts("P", "proxy.example", 30000, lambda node_id: True) if cluster else None
        scope = ConnectionScope(ports, Topics(), ProxyQuotas(config).home)
        out: list = []
        return ConnectionCore(
            scope,
            Session("P", "127.0.0.1"),
            max_request_bytes=1 << 30,
            max_response_bytes=1 << 30,
            max_inflight=1000,
            write_client=out.append,
            write_broker=out.append,
            clock=time.monotonic_ns,
            api_metrics=lambda key: metrics,
        ), out

    def cost(requests, responses, cluster: bool) -> float:
        c, out = core(cluster)
        started = time.process_time()
        for request, response in zip(requests, responses):
            c.client_bytes(request)
            if not c.flow.unhindered:
                c.step(time.monotonic_ns())
            c.broker_bytes(response)
            if not c.flow.unhindered:
                c.step(time.monotonic_ns())
            out.clear()
        return (time.process_time() - started) / len(requests) * 1e6

    n_base = 20_000
    base_requests = [memoryview(frame(encode_request_header(2, 5, i, "bench") + b"\x00" * 1024)) for i in range(n_base)]
    base_responses = [memoryview(frame(encode_response_header(2, 5, i) + b"\x00" * 40)) for i in range(n_base)]
    base = cost(base_requests, base_responses, False)
    print(f"ListOffsets pair: {base:.2f} us CPU", flush=True)
    request_body = encode_request(METADATA, 12, new_request(METADATA, 12, topics=None))
    for count in topic_counts:
        answer = encode_response(
            METADATA,
            12,
            new_response(
                METADATA,
                12,
                cluster_id="c",
                controller_id=1,
                brokers=[{"node_id": n, "host": f"kafka-{n}.internal", "port": 9092} for n in range(1, 4)],
                topics=[
                    {
                        "name": f"topic-{i:06d}",
                        "topic_id": uuid.uuid4(),
                        "partitions": [
                            {
                                "partition_index": p,
                                "leader_id": 1 + p,
                                "replica_nodes": [1, 2, 3],
                                "isr_nodes": [1, 2, 3],
                            }
                            for p in range(3)
                        ],
                    }
                    for i in range(count)
                ],
            ),
        )
        requests = [
            memoryview(frame(encode_request_header(METADATA, 12, i, "bench") + request_body)) for i in range(pairs)
        ]
        responses = [memoryview(frame(encode_response_header(METADATA, 12, i) + answer)) for i in range(pairs)]
        for mode in ("sidecar", "cluster"):
            us = cost(requests, responses, mode == "cluster")
            print(
                f"Metadata, {count:>6} topics ({len(answer):>9,} B), {mode:7}: {us:10.1f} us CPU per pair, "
                f"{us / base:8.1f} x a ListOffsets pair",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--topics", type=int, nargs="+", default=[10, 1000, 10000])
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args()
    run(os.path.abspath(args.tree), args.topics, args.pairs)


if __name__ == "__main__":
    main()
