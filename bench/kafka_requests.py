"""Kafka requests built with the proxy's codec and sent over plain sockets, for the benchmarks' tenants and set-up:
Produce v7 of one record, CreateTopics of one topic, one exchange on an asyncio connection (:func:`exchange`), and a
list of requests sent straight to a broker, past any proxy (:func:`at_broker`)."""

from __future__ import annotations

import asyncio
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from proxy.codec.apis import CREATE_TOPICS, PRODUCE  # noqa: E402
from proxy.codec.header import encode_request_header, frame, response_header_length  # noqa: E402
from proxy.codec.messages import decode_response, encode_request, new_request  # noqa: E402


async def exchange(reader, writer, api_key: int, version: int, client_id: str, correlation_id: int, body: bytes):
    writer.write(frame(encode_request_header(api_key, version, correlation_id, client_id) + body))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    response = struct.pack(">i", size) + await reader.readexactly(size)
    if struct.unpack_from(">i", response, 4)[0] != correlation_id:
        raise ConnectionError("correlation id mismatch")
    return decode_response(api_key, version, response[response_header_length(api_key, version, response) :])


def produce_body(topic: str, value: bytes, key: bytes | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=len(value) + 1024,
    )
    builder.append(0, timestamp=None, key=key, value=value, headers=[])
    return encode_request(
        PRODUCE,
        7,
        new_request(
            PRODUCE,
            7,
            acks=1,
            timeout_ms=10000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": bytes(builder.build())}]}],
        ),
    )


def create_topics_body(version: int, name: str, partitions: int = 1) -> bytes:
    return encode_request(
        CREATE_TOPICS,
        version,
        new_request(
            CREATE_TOPICS,
            version,
            timeout_ms=10000,
            topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1}],
        ),
    )


def at_broker(broker_port: int, requests: list[tuple[int, int, bytes]]) -> None:
    """Requests straight to the broker (set-up the quotas never see), one after another on one connection."""

    async def send():
        reader, writer = await asyncio.open_connection("127.0.0.1", broker_port)
        try:
            for n, (api_key, version, body) in enumerate(requests, 1):
                await exchange(reader, writer, api_key, version, "bench-setup", n, body)
        finally:
            writer.close()

    asyncio.run(send())
