"""What a request frame tells before its first byte moves: the header, and for Produce the ``acks`` field, the
producer ids of its record batches (every batch of every partition) and the only topic written; for Fetch v0-14
the replica id (:mod:`proxy.codec.fetch_prefix`).

A Produce's producer ids: a request of one partition holding one batch is read from a bounded prefix (about 100
bytes plus the topic's name), as it comes; any other shape is read whole first (an ``Incomplete`` until the frame is
in, so nothing of it moves before every batch is seen) and its batch headers walked by their lengths: no record is
decoded, nothing re-encoded. The walk is linear in the frame (at most one step per 12 bytes of records: a batch's
offset and length fields), which ``socket.request.max.bytes`` bounds.

Everything here reads bytes and returns values (no I/O); a prefix that is not in yet raises
:class:`~proxy.codec.header.Incomplete`.
"""

from __future__ import annotations

import struct

from proxy.codec.accel import NATIVE, choose
from proxy.codec.apis import FETCH, PRODUCE
from proxy.codec.errors import ProtocolError
from proxy.codec.fetch_prefix import with_fetch_replica_id
from proxy.codec.header import (
    MAX_HEADER_BYTES,
    REQUEST_LIMIT_NAME,
    HeaderTooLarge,
    Incomplete,
    RequestHeader,
    read_uvarint,
    request_header_fields,
    skip_tagged_fields,
    within_frame,
)
from proxy.codec.primitives import Bytes

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def pure_parse_request_prefix(
    buf: Bytes,
    max_size: int,
    read_produce_prefix: bool = False,
    limit_name: str = REQUEST_LIMIT_NAME,
    max_header: int = MAX_HEADER_BYTES,
) -> RequestHeader:
    """The request header, plus ``acks`` for Produce and the replica id for Fetch v0-14: everything needed before
    the frame's first byte moves. ``read_produce_prefix``: a Produce's producer ids and its only topic too
    (:func:`produce_prefix`), which the caller wants while a quota decides on them."""
    fields = request_header_fields(buf, max_size, limit_name, max_header)
    api_key = fields[1]
    if api_key == PRODUCE:
        size, _, version, _, _, header_length = fields
        acks, after = _acks_at(buf, size, header_length, version)
        if read_produce_prefix:  # read on from acks: the transactional id is read once
            pids, only_topic, topic_count = _read_topics(within_frame(buf, size), size + 4, after, version)
            return RequestHeader(*fields, acks, pids, only_topic, topic_count=topic_count)
        return RequestHeader(*fields, acks)
    header = RequestHeader(*fields)
    if api_key == FETCH:
        return with_fetch_replica_id(buf, header)
    return header


_PRODUCER_ID_AT = 43  # in a v2 record batch: base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2,
#                       last offset delta 4, first timestamp 8, max timestamp 8
_MAGIC_AT = 16  # in every magic: a v0/v1 message set entry is offset 8, size 4, crc 4, magic 1
_LOG_OVERHEAD = 12  # base offset and length: what a batch's length does not count
_V2_MIN = 61 - _LOG_OVERHEAD  # the smallest v2 batch (no records), as counted by its length field
_INT64 = struct.Struct(">q")
_LENGTH_MAGIC = struct.Struct(">i4xb")  # a batch's length and, 4 bytes on, its magic


def produce_producer_ids(buf: Bytes, header: RequestHeader) -> tuple[int, ...]:
    """The distinct producer ids (>= 0) of a Produce request's record batches, every batch of every partition, in
    the order they first appear; () when none has one (no data, old magics, no idempotence). Raises
    :class:`Incomplete` until the bytes needed are in: a bounded prefix for one partition holding one batch, the
    whole frame otherwise. What is not well formed is not this parser's business (the broker validates it): the
    walk stops there with the ids read so far (the broker appends nothing of a request it cannot parse, nor a batch
    cut short)."""
    return produce_prefix(buf, header)[0]


def produce_prefix(buf: Bytes, header: RequestHeader) -> tuple[tuple[int, ...], str | bytes | None]:
    """(:func:`produce_producer_ids`, the only topic the request writes: its name, or its topic id's 16 bytes from
    v13; None when it writes several or none, or the prefix is not well formed)."""
    pids, only_topic, _ = _read_prefix(
        within_frame(buf, header.size), header.size + 4, header.header_length, header.api_version
    )
    return pids, only_topic


class _FrameEnds(Exception):
    """The frame ends before the field: there is no producer id to read."""


def _read_prefix(body: Bytes, end: int, pos: int, version: int) -> tuple[tuple[int, ...], str | bytes | None, int]:
    """(producer ids, only topic, topic count or -1 when not read) of the Produce body starting at ``pos`` in
    ``body`` (cut at the frame's ``end``). One pass with local variables: this runs for every Produce while a
    producer-id quota or an internal topic is configured. Each field is skipped as a ``need`` of its size: past the
    frame's end there is no producer id (what was read so far); past ``body``'s end, :class:`Incomplete`. A request
    that is not one partition of one batch is walked whole (:func:`_walk`) once it is all in."""
    available = len(body)
    try:
        if version >= 3:  # transactional_id
            length, pos = _length(body, pos, end, available, version >= 9, _INT16)
            pos += _need(max(length, 0), pos, end, available)
        pos += _need(2, pos, end, available)  # acks
    except _FrameEnds:
        return (), None, -1
    return _read_topics(body, end, pos, version)


def _read_topics(body: Bytes, end: int, pos: int, version: int) -> tuple[tuple[int, ...], str | bytes | None, int]:
    """:func:`_read_prefix` from ``pos``, where ``timeout_ms`` starts (after ``acks``)."""
    only_topic = None
    topic_count = -1
    flexible = version >= 9
    available = len(body)
    try:
        pos += _need(4, pos, end, available)  # timeout_ms
        topics_at = pos
        topics, pos = _length(body, pos, end, available, flexible, _INT32)  # topic_data
        topic_count = max(topics, 0)
        if topics < 1:
            return (), None, topic_count
        if version >= 13:
            start = pos
            pos += _need(16, pos, end, available)  # topic_id (KIP-516) instead of the name
            topic: str | bytes | None = bytes(body[start : start + 16])
        else:
            length, pos = _length(body, pos, end, available, flexible, _INT16)
            length = max(length, 0)
            start = pos
            pos += _need(length, pos, end, available)
            try:
                topic = bytes(body[start : start + length]).decode()
            except UnicodeDecodeError:
                topic = None
        if topics == 1:
            only_topic = topic
        partitions, pos = _length(body, pos, end, available, flexible, _INT32)  # partition_data
        if partitions < 1 and topics == 1:
            return (), only_topic, topic_count
        if topics == 1 and partitions == 1:
            pos += _need(4, pos, end, available)  # index
            length, pos = _length(body, pos, end, available, flexible, _INT32)  # records: (compact) nullable bytes
            if length < _LOG_OVERHEAD:
                return (), only_topic, topic_count
            _need(_LOG_OVERHEAD, pos, end, available)
            if _INT32.unpack_from(body, pos + 8)[0] + _LOG_OVERHEAD == length:  # one batch: its header is enough
                if length < _LOG_OVERHEAD + _V2_MIN:
                    return (), only_topic, topic_count
                _need(_PRODUCER_ID_AT + 8, pos, end, available)
                if body[pos + _MAGIC_AT] != 2:
                    return (), only_topic, topic_count
                pid = _INT64.unpack_from(body, pos + _PRODUCER_ID_AT)[0]
                return ((pid,) if pid >= 0 else ()), only_topic, topic_count
        if available < end:  # several partitions or batches: none of it moves before every batch is read
            raise Incomplete
        return _walk(body, topics_at, end, version), only_topic, topic_count
    except _FrameEnds:
        return (), only_topic, topic_count


def _walk_frame(buf: Bytes, size: int, pos: int, version: int) -> tuple[int, ...]:
    """:func:`_walk` of the frame of ``size`` at the start of ``buf``: the C extension's way back for a request that
    is not one partition of one batch."""
    return _walk(within_frame(buf, size), pos, size + 4, version)


def _walk(body: Bytes, pos: int, end: int, version: int) -> tuple[int, ...]:
    """The distinct producer ids of every batch of every partition of the whole Produce body whose topic_data
    starts at ``pos``: each batch header is found by the previous one's length, and only its magic and producer id
    are read. Where the body stops being well formed the walk stops (a partition's records cut short or a batch
    shorter than a batch header: the next partition is read on from the records' own length, as the broker reads
    it)."""
    flexible = version >= 9
    found: dict[int, None] = {}
    last = -1
    head, unpack64 = _LENGTH_MAGIC.unpack_from, _INT64.unpack_from
    try:
        topics, pos = _length(body, pos, end, end, flexible, _INT32)
        for _ in range(topics):
            if version >= 13:
                pos += _need(16, pos, end, end)
            else:
                length, pos = _length(body, pos, end, end, flexible, _INT16)
                pos += _need(max(length, 0), pos, end, end)
            partitions, pos = _length(body, pos, end, end, flexible, _INT32)
            for _ in range(partitions):
                pos += _need(4, pos, end, end)  # index
                length, pos = _length(body, pos, end, end, flexible, _INT32)
                records_end = pos + _need(max(length, 0), pos, end, end)
                batch = pos
                while batch + _PRODUCER_ID_AT + 8 <= records_end:
                    size, magic = head(body, batch + 8)
                    if magic == 2:
                        if size < _V2_MIN or batch + _LOG_OVERHEAD + size > records_end:
                            break  # corrupt, or cut short: the broker appends none of it
                        pid = unpack64(body, batch + _PRODUCER_ID_AT)[0]
                        if pid != last:
                            if pid >= 0:
                                found[pid] = None
                            last = pid
                    elif size < 14:  # shorter than any v0/v1 message: corrupt (v0/v1 are skipped, never read)
                        break
                    batch += _LOG_OVERHEAD + size
                pos = records_end
                if flexible:
                    pos = skip_tagged_fields(body, pos, end)
            if flexible:
                pos = skip_tagged_fields(body, pos, end)
    except (_FrameEnds, Incomplete, HeaderTooLarge, ProtocolError):
        pass  # not well formed from here: the broker refuses what it cannot parse
    return tuple(found)


def _need(n: int, pos: int, end: int, available: int) -> int:
    """``n`` bytes at ``pos``: past the frame's ``end``, :class:`_FrameEnds`; past what is in, :class:`Incomplete`."""
    if pos + n > end:
        raise _FrameEnds
    if pos + n > available:
        raise Incomplete
    return n


def _length(body: Bytes, pos: int, end: int, available: int, flexible: bool, fixed: struct.Struct) -> tuple[int, int]:
    """(the length field at ``pos``, where it ends): compact (an unsigned varint, one more than the length; a
    one-byte one read here) in flexible versions, else ``fixed`` (int16 before a string, int32 before an array or
    bytes); -1 for null."""
    if flexible:
        if pos >= end:
            raise _FrameEnds
        if pos < available and body[pos] < 0x80:
            return body[pos] - 1, pos + 1
        value, pos = read_uvarint(body, pos)
        return value - 1, pos
    _need(fixed.size, pos, end, available)
    return fixed.unpack_from(body, pos)[0], pos + fixed.size


def produce_acks(buf: Bytes, header: RequestHeader) -> int:
    """The ``acks`` field of a Produce request: the first int16 after the (optional) transactional_id.

    v0-2 have no transactional_id; v3-8 carry it as a nullable string, v9+ as a compact nullable string.
    """
    return _acks(buf, header.size, header.header_length, header.api_version)


def _acks(buf: Bytes, size: int, pos: int, version: int) -> int:
    return _acks_at(buf, size, pos, version)[0]


def _acks_at(buf: Bytes, size: int, pos: int, version: int) -> tuple[int, int]:
    """(``acks``, where it ends) of the Produce body starting at ``pos``."""
    body = within_frame(buf, size)
    if version >= 9:
        length, pos = read_uvarint(body, pos)
        pos += max(length - 1, 0)
    elif version >= 3:
        if len(body) < pos + 2:
            raise Incomplete
        (length,) = _INT16.unpack_from(body, pos)
        if length < -1:
            raise ProtocolError(f"invalid transactional_id length {length}")
        pos += 2 + max(length, 0)
    if pos + 2 > size + 4:
        raise ProtocolError("Produce request ends before its acks field")
    if len(body) < pos + 2:
        raise Incomplete
    acks: int = _INT16.unpack_from(body, pos)[0]
    return acks, pos + 2


# The C extension's version where it is in use (proxy/codec/accel.py), the pure one above otherwise.
if NATIVE is not None:
    NATIVE.configure_produce(_walk_frame)
parse_request_prefix = choose("parse_request_prefix", pure_parse_request_prefix)
