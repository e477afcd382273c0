"""One request at a time over a plain socket, encoded and decoded with the proxy's codec."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid

from proxy.codec.error_codes import ERROR_CODES
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import wait_until


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def read_frame(sock: socket.socket) -> bytes:
    """One response frame, without its size prefix."""
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def exchange(sock: socket.socket, api_key: int, version: int, correlation_id: int = 1, **fields):
    body = encode_request(api_key, version, new_request(api_key, version, **fields))
    sock.sendall(frame(encode_request_header(api_key, version, correlation_id, "raw-test") + body))
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    response = struct.pack(">i", size) + recv_exactly(sock, size)
    assert struct.unpack_from(">i", response, 4)[0] == correlation_id
    return decode_response(api_key, version, response[response_header_length(api_key, version, response) :])


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def asked(port: int, api_key: int, version: int, **fields):
    """One request of ``api_key`` through the proxy listening on ``port``, on a connection of its own; its answer."""
    with connect(port) as sock:
        sock.settimeout(60)
        return exchange(sock, api_key, version, 1, **fields)


COORDINATOR_NOT_READY = frozenset(
    (
        ERROR_CODES["COORDINATOR_NOT_AVAILABLE"],
        ERROR_CODES["NOT_COORDINATOR"],
        ERROR_CODES["COORDINATOR_LOAD_IN_PROGRESS"],
    )
)


def heartbeat_until_answered(port: int, api_key: int, version: int, **fields):
    """A group heartbeat through the proxy, again while the coordinator is not ready (a fresh cluster answers
    COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until __consumer_offsets is created
    and loaded)."""
    answers: list = []

    def answered() -> bool:
        answers.append(asked(port, api_key, version, **fields))
        return answers[-1].error_code not in COORDINATOR_NOT_READY

    wait_until(answered, 60, f"the coordinator's answer to {api_key}")
    return answers[-1]


def streams_join(group: str, member: str, source: str, changelog_configs: list) -> dict:
    """The fields of a KIP-1071 StreamsGroupHeartbeat joining ``group`` with a one-sub-topology topology reading
    ``source``; with ``changelog_configs``, a store whose changelog topic (``<group>-store-changelog``) has them."""
    subtopology: dict = {"subtopology_id": "0", "source_topics": [source]}
    if changelog_configs:
        subtopology["state_changelog_topics"] = [
            {"name": f"{group}-store-changelog", "topic_configs": changelog_configs}
        ]
    return dict(
        group_id=group,
        member_id=member,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        process_id=str(uuid.uuid4()),
        topology={"epoch": 0, "subtopologies": [subtopology]},
        active_tasks=[],
        standby_tasks=[],
        warmup_tasks=[],
    )


def produce_at_broker(broker_port: int, topic: str, records: list[tuple[str, bytes]]) -> None:
    """``(key, value)`` records produced to partition 0 of ``topic`` at the broker itself (no proxy in the way: as
    whoever the broker's ACLs let write it would), dated now; the broker must take them."""
    import time

    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    now = int(time.time() * 1000)
    for offset, (key, value) in enumerate(records):
        builder.append(offset, timestamp=now, key=key.encode(), value=value, headers=[])
    sock = connect(broker_port)
    try:
        answer = exchange(
            sock,
            0,
            9,
            acks=1,
            timeout_ms=10_000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.build())}]}],
        )
    finally:
        sock.close()
    assert [p.error_code for t in answer.responses for p in t.partition_responses] == [0]


__all__ = ["connect", "exchange", "produce_at_broker", "read_frame", "recv_exactly"]


async def hold_open(port: int, source_ip: str, n: int):
    """Opens ``n`` connections to ``port`` from ``source_ip`` one after another, each sending ApiVersions v0 and kept
    open once answered: (each outcome, "served" or "closed"; the writers of those kept open)."""
    request = frame(encode_request_header(18, 0, 7, "conn-test"))
    outcomes, writers = [], []
    for _ in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source_ip, 0))
        writer.write(request)
        try:
            await asyncio.wait_for(reader.readexactly(8), 5)
            outcomes.append("served")
            writers.append(writer)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            outcomes.append("closed")
            writer.close()
    return outcomes, writers


def count_limit_outcomes(port: int) -> tuple[list[str], list[str], list[str]]:
    """KIP-402's counts as a proxy with ``max.connections.per.ip`` 2, an override of 3 for 127.0.0.5 and
    ``max.connections`` 6 should hold them: 3 connections from 127.0.0.4, 4 from 127.0.0.5, then 2 from 127.0.0.6
    (2 + 3 open: one more fits under 6), all held open until the end; each source's outcomes."""

    async def scenario():
        a, wa = await hold_open(port, "127.0.0.4", 3)
        b, wb = await hold_open(port, "127.0.0.5", 4)
        c, wc = await hold_open(port, "127.0.0.6", 2)
        for w in wa + wb + wc:
            w.close()
        return a, b, c

    return asyncio.run(scenario())
