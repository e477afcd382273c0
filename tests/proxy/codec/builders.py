"""Frame and record builders the codec tests share (a record batch of one producer, a protobuf-style varint)."""

from __future__ import annotations


def record_batch(producer_id=7, epoch=2, transactional=False, n=3):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=None, key=b"k", value=b"v" * 20, headers=[])
    return bytes(b.build())


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
