"""Walk the record batches in a ``records`` field without copying or decompressing them.

Produce requests and Fetch responses carry records as concatenated batches. Only batch headers
are read (a handful of ``unpack_from`` calls per batch), so the cost is per batch, never per byte.

Magic 2 (KIP-98) batch header offsets: baseOffset int64 @0, batchLength int32 @8 (bytes after this
field), partitionLeaderEpoch @12, magic int8 @16, crc @17, attributes int16 @21 (bit 4 0x10
transactional, bit 5 0x20 control), lastOffsetDelta @23, baseTimestamp @27, maxTimestamp @35,
producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53, records count int32 @57.
Magic 0/1 message sets (offset int64, message size int32, crc, magic @16, attributes @17) give sizes
only: no producer id.

A Fetch response may end in a partial batch (the broker cuts at max_bytes): that is reported as
``truncated_bytes``. In a Produce request a partial batch is a :class:`ProtocolError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from proxy.codec.errors import ProtocolError

LOG_OVERHEAD = 12  # offset int64 + size int32 precede every batch / message
MAGIC_OFFSET = 16
V2_HEADER_SIZE = 61
_MIN_SIZE = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}  # smallest valid batchLength per magic

TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
NO_PRODUCER_ID = -1

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_V2_ATTRIBUTES = struct.Struct(">h")
_V2_PRODUCER = struct.Struct(">qhii")  # producerId, producerEpoch, baseSequence, records count


@dataclass(frozen=True, slots=True)
class RecordBatchInfo:
    """What a quota or an audit needs from one batch header."""

    base_offset: int
    batch_length: int  # Kafka's batchLength: bytes after the length field
    magic: int
    attributes: int
    producer_id: int  # NO_PRODUCER_ID (-1) for magic 0/1 and idempotence off
    producer_epoch: int
    base_sequence: int
    record_count: int | None  # None for magic 0/1 (a message set entry may wrap many)

    @property
    def size_bytes(self) -> int:
        """Bytes the batch occupies, headers included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_FLAG)


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """Totals over one ``records`` field."""

    size_bytes: int  # the whole field, a truncated tail included
    batch_count: int
    record_count: int  # magic 2 batches only
    producers: tuple[tuple[int, int, bool], ...]  # (producer_id, producer_epoch, is_transactional) per v2 batch
    truncated_bytes: int = 0  # a partial final batch (legal in Fetch responses only)


def iter_batches(records: bytes | memoryview | None, *, allow_truncated: bool = False) -> Iterator[RecordBatchInfo]:
    """Yield each complete batch's header; stop silently at a partial tail if ``allow_truncated``.

    Raises ProtocolError for an impossible header (unknown magic, a length below the minimum) and,
    unless ``allow_truncated``, for a partial final batch.
    """
    if records is None:
        return
    buf = records if isinstance(records, memoryview) else memoryview(records)
    end = len(buf)
    pos = 0
    while pos < end:
        left = end - pos
        if left < MAGIC_OFFSET + 1:
            if allow_truncated:
                return
            raise ProtocolError(f"record batch header truncated: {left} bytes at offset {pos}")
        base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        magic = buf[pos + MAGIC_OFFSET]
        if magic > 2:
            raise ProtocolError(f"unknown record batch magic {magic} at offset {pos}")
        if batch_length < _MIN_SIZE[magic]:
            raise ProtocolError(f"record batch length {batch_length} too small for magic {magic} at offset {pos}")
        if LOG_OVERHEAD + batch_length > left:
            if allow_truncated:
                return
            raise ProtocolError(
                f"record batch of {LOG_OVERHEAD + batch_length} bytes at offset {pos} truncated to {left}"
            )
        if magic == 2:
            (attributes,) = _V2_ATTRIBUTES.unpack_from(buf, pos + 21)
            producer_id, producer_epoch, base_sequence, count = _V2_PRODUCER.unpack_from(buf, pos + 43)
            if count < 0:
                raise ProtocolError(f"negative record count {count} at offset {pos}")
            yield RecordBatchInfo(
                base_offset, batch_length, 2, attributes, producer_id, producer_epoch, base_sequence, count
            )
        else:
            yield RecordBatchInfo(base_offset, batch_length, magic, buf[pos + 17], NO_PRODUCER_ID, -1, -1, None)
        pos += LOG_OVERHEAD + batch_length


def records_summary(records: bytes | memoryview | None, *, allow_truncated: bool = False) -> RecordsSummary:
    """Size, batch and record counts and the producers of a ``records`` field.

    Use ``allow_truncated=False`` (the default) for Produce requests and ``True`` for Fetch
    responses, whose last batch may legally be cut short.
    """
    if records is None:
        return RecordsSummary(0, 0, 0, ())
    size = len(records) if isinstance(records, memoryview) else len(memoryview(records))
    batches = 0
    count = 0
    producers = []
    walked = 0
    for batch in iter_batches(records, allow_truncated=allow_truncated):
        batches += 1
        walked += batch.size_bytes
        if batch.record_count is not None:
            count += batch.record_count
            producers.append((batch.producer_id, batch.producer_epoch, batch.is_transactional))
    return RecordsSummary(size, batches, count, tuple(producers), size - walked)


def produce_records_summary(records: bytes | memoryview | None) -> RecordsSummary:
    """:func:`records_summary` for a Produce request: a partial batch is a ProtocolError."""
    return records_summary(records, allow_truncated=False)


def fetch_records_summary(records: bytes | memoryview | None) -> RecordsSummary:
    """:func:`records_summary` for a Fetch response: a partial final batch is reported, not raised."""
    return records_summary(records, allow_truncated=True)
