"""Codec cost: decoding a Produce request of 64 partitions x 64 KiB, ours against the independent codecs.

Kafka's message bodies can be decoded by kio (generated from Kafka's schemas) and kafka-python 3.x
(``kafka.protocol``); the proxy uses its own compiled schema table because kio raises on unknown tagged fields and
kafka-python drops them on re-encode (a proxy must pass them through). This prints microseconds per decode (and
per decode + re-encode) for each, so the choice stays a measured one. Usage: ``python bench/codec.py``.
"""

from __future__ import annotations

import os
import sys
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from proxy.codec.apis import PRODUCE  # noqa: E402
from proxy.codec.messages import decode_request, encode_request, new_request  # noqa: E402

VERSION = 9
PARTITIONS = 64
PARTITION_BYTES = 64 * 1024


def records_batch(size: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=1000,
        producer_epoch=0,
        base_sequence=0,
        batch_size=size * 2,
    )
    i = 0
    while builder.size() < size - 1100:
        builder.append(i, timestamp=None, key=None, value=b"v" * 1000, headers=[])
        i += 1
    return bytes(builder.build())


def body() -> bytes:
    batch = records_batch(PARTITION_BYTES)
    msg = new_request(
        PRODUCE,
        VERSION,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            {"name": f"topic-{t}", "partition_data": [{"index": p, "records": batch} for p in range(8)]}
            for t in range(PARTITIONS // 8)
        ],
    )
    return encode_request(PRODUCE, VERSION, msg)


def per_call_us(fn, seconds: float = 1.0) -> float:
    number, elapsed = 1, 0.0
    while elapsed < seconds / 5:
        number *= 2
        elapsed = timeit.timeit(fn, number=number)
    runs = [timeit.timeit(fn, number=number) / number for _ in range(5)]
    return min(runs) * 1e6


def main() -> None:
    raw = body()
    view = memoryview(raw)
    print(
        f"Produce v{VERSION} request body: {PARTITIONS} partitions x {PARTITION_BYTES // 1024} KiB = {len(raw) / 2**20:.1f} MiB"
    )
    ours = per_call_us(lambda: decode_request(PRODUCE, VERSION, view))
    msg = decode_request(PRODUCE, VERSION, view)
    ours_rt = per_call_us(lambda: encode_request(PRODUCE, VERSION, decode_request(PRODUCE, VERSION, view)))
    assert encode_request(PRODUCE, VERSION, msg) == raw
    print(f"  ours (proxy.codec)      decode {ours:9.1f} us   decode+encode {ours_rt:9.1f} us")
    try:
        from kio.index import load_payload_module
        from kio.serial import entity_reader
        from kio.static.constants import EntityType

        cls = load_payload_module(PRODUCE, VERSION, EntityType.request).ProduceRequest
        reader = entity_reader(cls)
        kio_us = per_call_us(lambda: reader(view, 0))
        print(f"  kio                     decode {kio_us:9.1f} us")
    except Exception as exc:  # noqa: BLE001 - report, do not fail the benchmark
        print(f"  kio                     unavailable: {exc!r}")
    try:
        from kafka.protocol.producer.produce import ProduceRequest

        kp_us = per_call_us(lambda: ProduceRequest.decode(raw, version=VERSION))
        print(f"  kafka-python 3.x        decode {kp_us:9.1f} us")
    except Exception as exc:  # noqa: BLE001
        print(f"  kafka-python 3.x        unavailable: {exc!r}")
    started = time.perf_counter()
    for _ in range(1000):
        decode_request(PRODUCE, VERSION, view)
    print(f"  (1000 decodes of ours in {time.perf_counter() - started:.3f} s)")


if __name__ == "__main__":
    main()
