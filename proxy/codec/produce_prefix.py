"""What a request frame tells before its first byte moves: the header, and for Produce the ``acks`` field, the
first record batch's producer id and the only topic written, read from a bounded prefix of the body; for Fetch
v0-14 the replica id (:mod:`proxy.codec.fetch_prefix`).

Everything here reads bytes and returns values (no I/O); a prefix that is not in yet raises
:class:`~proxy.codec.header.Incomplete`.
"""

from __future__ import annotations

import struct

from proxy.codec.apis import FETCH, PRODUCE
from proxy.codec.errors import ProtocolError
from proxy.codec.fetch_prefix import with_fetch_replica_id
from proxy.codec.header import (MAX_HEADER_BYTES, Incomplete, RequestHeader, read_uvarint, request_header_fields,
                                within_frame)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def parse_request_prefix(buf, max_size: int, producer_ids=None,
                         limit_name: str = "socket.request.max.bytes",
                         max_header: int = MAX_HEADER_BYTES) -> RequestHeader:
    """The request header, plus ``acks`` for Produce and the replica id for Fetch v0-14: everything needed before
    the frame's first byte moves. ``producer_ids`` (an object with ``enabled``, read per request): when enabled, a
    Produce's first producer id and its only topic too (:func:`produce_prefix`), from a bounded prefix of the body."""
    fields = request_header_fields(buf, max_size, limit_name, max_header)
    api_key = fields[1]
    if api_key == PRODUCE:
        size, _, version, _, _, header_length = fields
        acks = _acks(buf, size, header_length, version)
        if producer_ids is not None and producer_ids.enabled:
            pid, only_topic, topic_count = _read_prefix(within_frame(buf, size), size + 4, header_length, version)
            return RequestHeader(*fields, acks, pid, only_topic, topic_count=topic_count)
        return RequestHeader(*fields, acks)
    header = RequestHeader(*fields)
    if api_key == FETCH:
        return with_fetch_replica_id(buf, header)
    return header


_PRODUCER_ID_AT = 43  # in a v2 record batch: base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2,
#                       last offset delta 4, first timestamp 8, max timestamp 8
_MAGIC_AT = 16
_INT64 = struct.Struct(">q")


def produce_producer_id(buf, header: RequestHeader) -> int:
    """The producer id of a Produce request's first record batch (a request comes from one producer), or -1 when
    it has none (no data, an old magic, no idempotence). Reads at most the start of the body up to that batch's
    header (about 100 bytes plus the first topic's name): raises :class:`Incomplete` until those bytes are in.
    What is not a well-formed prefix is not this parser's business (the broker validates it): it gives -1."""
    return produce_prefix(buf, header)[0]


def produce_prefix(buf, header: RequestHeader) -> tuple[int, str | bytes | None]:
    """(:func:`produce_producer_id`, the only topic the request writes: its name, or its topic id's 16 bytes from
    v13; None when it writes several or none, or the prefix is not well formed)."""
    pid, only_topic, _ = _read_prefix(within_frame(buf, header.size), header.size + 4, header.header_length,
                                      header.api_version)
    return pid, only_topic


class _FrameEnds(Exception):
    """The frame ends before the field: there is no producer id to read."""


def _read_prefix(body, end: int, pos: int, version: int) -> tuple[int, str | bytes | None, int]:
    """(producer id or -1, only topic, topic count or -1 when not read) of the Produce body starting at ``pos`` in
    ``body`` (cut at the frame's ``end``). One pass with local variables: this runs for every Produce while a
    producer-id quota or an internal topic is configured. Each field is skipped as a ``need`` of its size: past the
    frame's end there is no producer id (-1, with what was read so far); past ``body``'s end, :class:`Incomplete`."""
    only_topic = None
    topic_count = -1
    flexible = version >= 9
    available = len(body)
    try:
        if version >= 3:  # transactional_id
            length, pos = _length(body, pos, end, available, flexible, _INT16)
            pos += _need(max(length, 0), pos, end, available)
        pos += _need(6, pos, end, available)  # acks, timeout_ms
        topics, pos = _length(body, pos, end, available, flexible, _INT32)  # topic_data
        topic_count = max(topics, 0)
        if topics < 1:
            return -1, None, topic_count
        if version >= 13:
            start = pos
            pos += _need(16, pos, end, available)  # topic_id (KIP-516) instead of the name
            topic = bytes(body[start:start + 16])
        else:
            length, pos = _length(body, pos, end, available, flexible, _INT16)
            length = max(length, 0)
            start = pos
            pos += _need(length, pos, end, available)
            try:
                topic = bytes(body[start:start + length]).decode()
            except UnicodeDecodeError:
                topic = None
        if topics == 1:
            only_topic = topic
        partitions, pos = _length(body, pos, end, available, flexible, _INT32)  # partition_data
        if partitions < 1:
            return -1, only_topic, topic_count
        pos += _need(4, pos, end, available)  # index
        length, pos = _length(body, pos, end, available, flexible, _INT32)  # records: (compact) nullable bytes
        if length < _PRODUCER_ID_AT + 8:
            return -1, only_topic, topic_count
        _need(_PRODUCER_ID_AT + 8, pos, end, available)
        if body[pos + _MAGIC_AT] != 2:
            return -1, only_topic, topic_count
        return max(-1, _INT64.unpack_from(body, pos + _PRODUCER_ID_AT)[0]), only_topic, topic_count
    except _FrameEnds:
        return -1, only_topic, topic_count


def _need(n: int, pos: int, end: int, available: int) -> int:
    """``n`` bytes at ``pos``: past the frame's ``end``, :class:`_FrameEnds`; past what is in, :class:`Incomplete`."""
    if pos + n > end:
        raise _FrameEnds
    if pos + n > available:
        raise Incomplete
    return n


def _length(body, pos: int, end: int, available: int, flexible: bool, fixed: struct.Struct) -> tuple[int, int]:
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


def produce_acks(buf, header: RequestHeader) -> int:
    """The ``acks`` field of a Produce request: the first int16 after the (optional) transactional_id.

    v0-2 have no transactional_id; v3-8 carry it as a nullable string, v9+ as a compact nullable string.
    """
    return _acks(buf, header.size, header.header_length, header.api_version)


def _acks(buf, size: int, pos: int, version: int) -> int:
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
    return _INT16.unpack_from(body, pos)[0]
