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
from proxy.codec.header import (MAX_HEADER_BYTES, Incomplete, RequestHeader, parse_request_header, read_uvarint,
                                within_frame)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def parse_request_prefix(buf, max_size: int, producer_ids=None,
                         limit_name: str = "socket.request.max.bytes",
                         max_header: int = MAX_HEADER_BYTES) -> RequestHeader:
    """The request header, plus ``acks`` for Produce and the replica id for Fetch v0-14: everything needed before
    the frame's first byte moves. ``producer_ids`` (an object with ``enabled``, read per request): when enabled, a
    Produce's first producer id and its only topic too (:func:`produce_prefix`), from a bounded prefix of the body."""
    header = parse_request_header(buf, max_size, limit_name, max_header)
    if header.api_key == FETCH:
        return with_fetch_replica_id(buf, header)
    if header.api_key == PRODUCE:
        acks = produce_acks(buf, header)
        if producer_ids is not None and producer_ids.enabled:
            parser = _ProducePrefix(buf, header)
            pid = parser.read()
            return RequestHeader(header.size, header.api_key, header.api_version, header.correlation_id,
                                 header.client_id, header.header_length, acks, pid, parser.only_topic,
                                 topic_count=parser.topic_count)
        return RequestHeader(header.size, header.api_key, header.api_version, header.correlation_id,
                             header.client_id, header.header_length, acks)
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
    parser = _ProducePrefix(buf, header)
    return parser.read(), parser.only_topic


class _FrameEnds(Exception):
    """The frame ends before the field: there is no producer id to read."""


class _ProducePrefix:
    __slots__ = ("body", "end", "pos", "version", "flexible", "only_topic", "topic_count")

    def __init__(self, buf, header: RequestHeader) -> None:
        self.body = within_frame(buf, header.size)
        self.end = header.size + 4
        self.pos = header.header_length
        self.version = header.api_version
        self.flexible = header.api_version >= 9
        self.only_topic: str | bytes | None = None
        self.topic_count = -1  # -1 until read (a prefix that is not well formed leaves it so)

    def read(self) -> int:
        """The producer id (-1 for none), reading ``only_topic`` and ``topic_count`` on the way."""
        try:
            return self.producer_id()
        except _FrameEnds:
            return -1

    def need(self, n: int) -> int:
        """Skip ``n`` bytes; return where they start."""
        pos = self.pos
        if pos + n > self.end:
            raise _FrameEnds
        if pos + n > len(self.body):
            raise Incomplete
        self.pos = pos + n
        return pos

    def uvarint(self) -> int:
        if self.pos >= self.end:
            raise _FrameEnds
        value, self.pos = read_uvarint(self.body, self.pos)
        return value

    def length(self, nullable_bytes: bool = False) -> int:
        """A string, array or bytes length (compact in flexible versions)."""
        if self.flexible:
            return self.uvarint() - 1
        struct_ = _INT32 if nullable_bytes else _INT16
        return struct_.unpack_from(self.body, self.need(struct_.size))[0]

    def array_length(self) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return _INT32.unpack_from(self.body, self.need(4))[0]

    def producer_id(self) -> int:
        if self.version >= 3:
            self.need(max(self.length(), 0))  # transactional_id
        self.need(6)  # acks, timeout_ms
        topics = self.array_length()  # topic_data
        self.topic_count = max(topics, 0)
        if topics < 1:
            return -1
        if self.version >= 13:
            start = self.need(16)  # topic_id (KIP-516) instead of the name
            topic = bytes(self.body[start:start + 16])
        else:
            length = max(self.length(), 0)
            start = self.need(length)
            try:
                topic = bytes(self.body[start:start + length]).decode()
            except UnicodeDecodeError:
                topic = None
        if topics == 1:
            self.only_topic = topic
        if self.array_length() < 1:  # partition_data
            return -1
        self.need(4)  # index
        if self.length(nullable_bytes=True) < _PRODUCER_ID_AT + 8:  # records
            return -1
        start = self.need(_PRODUCER_ID_AT + 8)
        if self.body[start + _MAGIC_AT] != 2:
            return -1
        return max(-1, _INT64.unpack_from(self.body, start + _PRODUCER_ID_AT)[0])


def produce_acks(buf, header: RequestHeader) -> int:
    """The ``acks`` field of a Produce request: the first int16 after the (optional) transactional_id.

    v0-2 have no transactional_id; v3-8 carry it as a nullable string, v9+ as a compact nullable string.
    """
    pos = header.header_length
    version = header.api_version
    body = within_frame(buf, header.size)
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
    if pos + 2 > header.size + 4:
        raise ProtocolError("Produce request ends before its acks field")
    if len(body) < pos + 2:
        raise Incomplete
    return _INT16.unpack_from(body, pos)[0]
