"""Python cost of one request and its response on the connection's pure path, without sockets.

Feeds pairs of frames (a request, then its answer) through :class:`proxy.connection.core.ConnectionCore` as the
socket shell would (applying state only when something holds), one frame per read, and prints microseconds per
pair. ``--api`` chooses the pair:

- ``list-offsets`` (the default): a 1 KiB ListOffsets v5 request, which no handler decodes, and a small answer;
- ``metadata``: a Metadata v12 request for one topic (by name) and its answer (one broker, one partition), as a
  client refreshing its metadata sends it: in cluster mode the answer's broker is rewritten;
- ``produce``: a one-message Produce (one 100-byte record in a v2 batch with a producer id, ``acks=1``) and its
  one-partition answer, as librdkafka sends it with ``linger.ms`` 0;
- ``fetch``: a consumer's Fetch of 10 partitions of one topic (by topic id) and its empty answer, as one member of a
  polling consumer group sends it.

``--quotas``: issue 46's configuration (``bench/anchors_kroxylicious.py``'s proxy): cluster mode (broker addresses
rewritten), ``producer_byte_rate``, ``consumer_byte_rate`` and ``producer_ids_rate`` for ``<default>`` users and
``controller_mutation_rate`` for ``<default>`` client ids, configured and never binding; without it, no quotas and
sidecar mode. The per-API metrics are the proxy's own. Usage:
``python bench/pipeline_cost.py [--pairs N] [--api list-offsets|metadata|produce|fetch] [--version V] [--quotas]
[--request-rate] [--topic-quota] [--partition-quota] [--profile FILE]`` (``--request-rate``: a ``request_rate`` for
``<default>`` users too, never binding; ``--topic-quota`` and ``--partition-quota``: a topic and a partition byte
rate, never binding; ``--profile``: the pairs alone under cProfile, for ``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_kroxylicious import QUOTAS  # noqa: E402  (issue 46's, as the proxy runs beside Kroxylicious)
from bench.callgrind import instrument  # noqa: E402
from bench.produce_path_cost import one_message_batch  # noqa: E402
from config.loader import parse_config  # noqa: E402
from proxy.apis import ConnectionScope, Session  # noqa: E402
from proxy.cluster.broker_ports import BrokerPorts  # noqa: E402
from proxy.cluster.topics import Topics  # noqa: E402
from proxy.codec.apis import FETCH, LIST_OFFSETS, METADATA, PRODUCE  # noqa: E402
from proxy.codec.header import encode_request_header, encode_response_header, frame  # noqa: E402
from proxy.codec.messages import encode_request, encode_response, new_request, new_response  # noqa: E402
from proxy.connection.client_context import ApiMetricsCache  # noqa: E402
from proxy.connection.core import ConnectionCore  # noqa: E402
from proxy.enforcement.internal_topic_guard import InternalTopicGuard  # noqa: E402
from proxy.enforcement.proxy_quotas import ProxyQuotas  # noqa: E402
from proxy.ops.metrics import ProxyMetrics  # noqa: E402

DEFAULT_VERSIONS = {"list-offsets": 5, "metadata": 12, "produce": 10, "fetch": 16}
TOPIC_ID = uuid.UUID("6f1b3c2e-5a4d-4e8f-9b7a-1c2d3e4f5a6b")


def bodies(api: str, version: int) -> tuple[int, bytes, bytes]:
    """(api key, request body, response body) of the chosen pair."""
    if api == "list-offsets":
        return LIST_OFFSETS, b"\x00" * 1024, b"\x00" * 40
    if api == "metadata":
        return METADATA, *metadata_pair(version)
    if api == "produce":
        topic = {"topic_id": TOPIC_ID} if version >= 13 else {"name": "small"}
        request = new_request(
            PRODUCE,
            version,
            transactional_id=None,
            acks=1,
            timeout_ms=30000,
            topic_data=[{**topic, "partition_data": [{"index": 0, "records": one_message_batch()}]}],
        )
        answer = new_response(
            PRODUCE,
            version,
            responses=[{**topic, "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 41}]}],
        )
        return PRODUCE, encode_request(PRODUCE, version, request), encode_response(PRODUCE, version, answer)
    partitions = range(10)
    topic = {"topic_id": TOPIC_ID} if version >= 13 else {"topic": "polled"}
    request = new_request(
        FETCH,
        version,
        max_wait_ms=10,
        min_bytes=1,
        max_bytes=52428800,
        topics=[
            {
                **topic,
                "partitions": [
                    {"partition": p, "fetch_offset": 1000, "partition_max_bytes": 1048576} for p in partitions
                ],
            }
        ],
    )
    answer = new_response(
        FETCH,
        version,
        responses=[
            {
                **topic,
                "partitions": [
                    {"partition_index": p, "high_watermark": 1000, "last_stable_offset": 1000, "records": b""}
                    for p in partitions
                ],
            }
        ],
    )
    return FETCH, encode_request(FETCH, version, request), encode_response(FETCH, version, answer)


def metadata_pair(version: int) -> tuple[bytes, bytes]:
    """A Metadata request for one topic and its answer: one broker, one partition led by it."""
    request = new_request(METADATA, version, topics=[{"name": "polled"}], allow_auto_topic_creation=False)
    partition = {"partition_index": 0, "leader_id": 1, "leader_epoch": 3, "replica_nodes": [1], "isr_nodes": [1]}
    answer = new_response(
        METADATA,
        version,
        brokers=[{"node_id": 1, "host": "broker-1.kafka.example", "port": 9092}],
        cluster_id="bench",
        controller_id=1,
        topics=[{"name": "polled", "topic_id": TOPIC_ID, "partitions": [partition]}],
    )
    return encode_request(METADATA, version, request), encode_response(METADATA, version, answer)


# --request-rate: every user's requests of the APIs a request_rate counts by default (ListOffsets and Metadata among
# them), counted and never throttled
DEFAULT_USER = {"user": "<default>"}
REQUEST_RATE = {"request_rate": 10**6}


NEVER = 10**12  # bytes/s: a quota far above what is sent
TOPIC_QUOTA = {"entity": {"topic": "<default>"}, "producer_byte_rate": NEVER, "consumer_byte_rate": NEVER}
PARTITION_QUOTA = {
    "entity": {"topic": "small", "partition": "<default>"},
    "producer_byte_rate": NEVER,
    "consumer_byte_rate": NEVER,
}
"""``--topic-quota`` and ``--partition-quota``: every topic's byte rates, and each partition's of the topic a Produce
writes (by name, before v13), configured and never binding."""


def scope_for(quotas: bool, request_rate: bool = False, named: tuple[dict, ...] = ()) -> ConnectionScope:
    """The listener scope of a proxy configured as :data:`QUOTAS` in cluster mode (``quotas``), or as the minimal
    sidecar; with :data:`REQUEST_RATE` too (``request_rate``), and the topic or partition entries ``named``."""
    entries = [dict(entry) for entry in QUOTAS] if quotas else []
    entries += [dict(entry) for entry in named]
    if request_rate:
        users = [entry for entry in entries if entry["entity"] == DEFAULT_USER]
        if users:
            users[0].update(REQUEST_RATE)
        else:
            entries.append({"entity": DEFAULT_USER, **REQUEST_RATE})
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
            "listeners": [{"name": "P", "bind": "127.0.0.1:0"}],
            "metrics": {"bind": "127.0.0.1:0"},
            **({"quotas": entries} if entries else {}),
        }
    )
    proxy_quotas = ProxyQuotas(config)
    ports = BrokerPorts("P", "proxy.example", 30000, lambda node_id: True) if quotas else None
    guard = InternalTopicGuard(proxy_quotas.internal_topics, config.admin_principals)
    return ConnectionScope(ports, Topics(), proxy_quotas.home, guard=guard)


def core_for(scope: ConnectionScope, out: list, metrics: ProxyMetrics) -> ConnectionCore:
    """A connection core of a listener of ``scope``, writing both ways to ``out``."""
    return ConnectionCore(
        scope,
        Session("P", "127.0.0.1"),
        max_request_bytes=100 << 20,
        max_response_bytes=100 << 20,
        max_inflight=200,
        write_client=out.append,
        write_broker=out.append,
        clock=time.monotonic_ns,
        api_metrics=ApiMetricsCache(metrics, "P").__getitem__,  # as the client socket looks them up
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--api", choices=sorted(DEFAULT_VERSIONS), default="list-offsets")
    parser.add_argument("--version", type=int, help="the API version (default: 5, 12, 10 and 16 for the four)")
    parser.add_argument("--quotas", action="store_true", help="issue 46's quotas, never binding, in cluster mode")
    parser.add_argument("--request-rate", action="store_true", help="a request_rate for every user, never binding")
    parser.add_argument("--topic-quota", action="store_true", help="a {topic: <default>} byte rate, never binding")
    parser.add_argument(
        "--partition-quota", action="store_true", help="a partition: <default> byte rate of the topic, never binding"
    )
    parser.add_argument("--profile", metavar="FILE", help="cProfile the pairs alone (not the set-up) into FILE")
    parser.add_argument("--toggle", action="store_true", help=argparse.SUPPRESS)  # (pipeline_instructions.py's)
    args = parser.parse_args()
    n = args.pairs
    version = DEFAULT_VERSIONS[args.api] if args.version is None else args.version
    api_key, request_body, response_body = bodies(args.api, version)
    out: list = []
    metrics = ProxyMetrics()
    named = (TOPIC_QUOTA,) if args.topic_quota else ()
    named += (PARTITION_QUOTA,) if args.partition_quota else ()
    core = core_for(scope_for(args.quotas, args.request_rate, named), out, metrics)
    requests = [memoryview(frame(encode_request_header(api_key, version, i, "bench") + request_body)) for i in range(n)]
    responses = [memoryview(frame(encode_response_header(api_key, version, i) + response_body)) for i in range(n)]
    flow = core.flow
    profile = cProfile.Profile() if args.profile else None
    if profile is not None:
        profile.enable()
    if args.toggle:
        instrument("on")
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
    if args.toggle:
        instrument("off")
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    api = metrics.api("P", api_key)
    if api.requests != n or not api.response_bytes:
        raise SystemExit(f"pipeline_cost: {api.requests} of {n} requests counted, {api.response_bytes} response bytes")
    print(
        f"{elapsed / n * 1e6:.2f} us per request + response ({n} pairs, {args.api} v{version}, "
        f"{'issue 46 quotas, cluster mode' if args.quotas else 'no quotas'}"
        f"{', request_rate' if args.request_rate else ''}{', a topic quota' if args.topic_quota else ''}"
        f"{', a partition quota' if args.partition_quota else ''})"
    )


if __name__ == "__main__":
    main()
