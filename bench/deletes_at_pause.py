"""What group deletions write to a Kafka broker's disk straight and through a proxy at PAUSE (issue 44).

One Apache Kafka 4.4 node from the jars, and a proxy (its own process) in front of it whose volume is at PAUSE (no
usage snapshot: ``missing_data_action: PAUSE``). A standalone group commits one offset straight to the broker; then
an OffsetDelete naming that partition ``--names`` times is sent straight and through the proxy (a fresh commit
before each), and one naming it once through the proxy. A DeleteShareGroupOffsets and an AlterShareGroupOffsets
are sent through the proxy. Reported for each: the error code, the time to the answer and how much
``__consumer_offsets`` grew on the broker's disk (its log files' sizes).

Targets: through the proxy at PAUSE, the OffsetDelete naming a partition more than once is refused
(INVALID_REQUEST, as in every state) and writes nothing; one naming it once is deleted (one tombstone); the share group's
offsets are neither altered nor deleted (COORDINATOR_NOT_AVAILABLE).

Usage: ``python bench/deletes_at_pause.py [--names 3000]``.
"""

from __future__ import annotations

import argparse
import glob
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.anchors_common import ProxyProcess, Verdicts  # noqa: E402
from proxy.codec.apis import (  # noqa: E402
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    response_header_version,
)
from proxy.codec.error_codes import COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST, NONE, error_name  # noqa: E402
from proxy.codec.header import encode_request_header, frame  # noqa: E402
from proxy.codec.messages import Message, decode_response, encode_request, new_request  # noqa: E402
from tests.harness import free_port  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

GROUP, TOPIC = "bench-deletes", "bench-deletes"


class Wire:
    """One connection sending requests of the codec and reading their answers, one at a time."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=120)
        self.correlation = 0

    def call(self, api_key: int, version: int, msg: Message) -> tuple[Message, float]:
        self.correlation += 1
        header = encode_request_header(api_key, version, self.correlation, "bench-deletes")
        started = time.monotonic()
        self.sock.sendall(frame(header + encode_request(api_key, version, msg)))
        (size,) = struct.unpack(">i", self._read(4))
        body = self._read(size)
        took = time.monotonic() - started
        at = 4 + response_header_version(api_key, version)  # correlation id, a flexible header's tagged fields
        return decode_response(api_key, version, memoryview(body)[at:]), took

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out


def offsets_log_bytes(cluster: KafkaCluster) -> int:
    return sum(os.path.getsize(f) for f in glob.glob(f"{cluster.nodes[0].data_dir}/__consumer_offsets-*/*.log"))


def commit(wire: Wire) -> int:
    partition = {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
    msg = new_request(
        OFFSET_COMMIT,
        2,
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[{"name": TOPIC, "partitions": [partition]}],
    )
    answer, _ = wire.call(OFFSET_COMMIT, 2, msg)
    return answer.topics[0].partitions[0].error_code


def written(cluster: KafkaCluster, send) -> tuple[Message, float, int]:
    """``send()``'s answer, its time, and what __consumer_offsets grew by meanwhile (read once the answer is in)."""
    before = offsets_log_bytes(cluster)
    answer, took = send()
    time.sleep(0.5)  # an answered write is in the log's file already; the margin covers nothing else
    return answer, took, offsets_log_bytes(cluster) - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=3000, help="how often the OffsetDelete names the partition")
    args = parser.parse_args()
    verdicts = Verdicts()
    cluster = KafkaCluster(1, name="bench-deletes").start()
    proxy = None
    try:
        direct_address = cluster.nodes[0].direct
        port = free_port()
        volume = {"volume_usage": {"missing_data_action": "PAUSE", "produce_base_rate": 10_000_000}}
        proxy = ProxyProcess(port=port, upstream=direct_address, extra=volume).start()
        direct, through = Wire(direct_address), Wire(f"127.0.0.1:{port}")
        admin = cluster.nodes[0]
        deadline = time.monotonic() + 60
        from kafka.admin import KafkaAdminClient, NewTopic

        KafkaAdminClient(bootstrap_servers=admin.direct).create_topics([NewTopic(TOPIC, 1, 1)])
        while commit(direct) != NONE:  # the coordinator loads __consumer_offsets first
            if time.monotonic() > deadline:
                raise SystemExit("no coordinator in 60 s")
            time.sleep(0.5)

        def offset_delete(wire: Wire, names: int):
            named = [{"name": TOPIC, "partitions": [{"partition_index": 0}] * names}]
            return lambda: wire.call(OFFSET_DELETE, 0, new_request(OFFSET_DELETE, 0, group_id=GROUP, topics=named))

        print(f"OffsetDelete naming one committed partition {args.names:,} times, then once:")
        results = {}
        for where, wire, names in (
            ("straight", direct, args.names),
            ("proxy", through, args.names),
            ("proxy", through, 1),
        ):
            commit(direct)
            answer, took, grew = written(cluster, offset_delete(wire, names))
            results[(where, names)] = (answer.error_code, grew)
            print(
                f"  {where:>8}, {names:>6,} names: {error_name(answer.error_code):<26} in {took:6.2f} s, "
                f"__consumer_offsets +{grew:,} bytes"
            )
        code, grew = results[("proxy", args.names)]
        verdicts.check(
            "named twice: refused at PAUSE (INVALID_REQUEST), nothing written",
            code == INVALID_REQUEST and grew == 0,
            f"{error_name(code)}, +{grew} bytes",
        )
        code, grew = results[("proxy", 1)]
        verdicts.check("named once: deleted at PAUSE", code == NONE and grew > 0, f"{error_name(code)}, +{grew} bytes")

        share = (
            (
                ALTER_SHARE_GROUP_OFFSETS,
                dict(topics=[{"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 0}]}]),
            ),
            (DELETE_SHARE_GROUP_OFFSETS, dict(topics=[{"topic_name": TOPIC}])),
        )
        for api_key, fields in share:
            answer, took, grew = written(
                cluster, lambda: through.call(api_key, 0, new_request(api_key, 0, group_id=GROUP, **fields))
            )
            name = "AlterShareGroupOffsets" if api_key == ALTER_SHARE_GROUP_OFFSETS else "DeleteShareGroupOffsets"
            verdicts.check(
                f"{name} refused at PAUSE",
                answer.error_code == COORDINATOR_NOT_AVAILABLE,
                f"{error_name(answer.error_code)} in {took:.2f} s, +{grew} bytes",
            )
        print(f"  refused writes counted by the proxy: {proxy.metric('volume_refused_writes_total'):.0f}")
    finally:
        if proxy is not None:
            proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
