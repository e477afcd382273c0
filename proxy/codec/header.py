"""Request and response headers: parsed from bytes, no I/O.

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16
length). v2 (flexible request versions) adds tagged fields after client_id; client_id keeps its int16 length
even there. Response header v0 is correlation_id only; v1 adds tagged fields. ApiVersions responses always use
header v0 so that a client which asked for a version the broker does not know can still read the answer.

Parsers take a buffer that starts at the 4-byte frame size and raise :class:`Incomplete` when the buffer ends
before the part they need, :class:`ProtocolError` when the bytes cannot be a header.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from proxy.codec.accel import NATIVE, choose
from proxy.codec.apis import FLEXIBLE_SINCE, SASL_AUTHENTICATE, request_header_version, response_header_version
from proxy.codec.errors import ProtocolError
from proxy.codec.primitives import Bytes

_REQUEST_FIXED = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, client_id length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_RESPONSE_FIXED = struct.Struct(">ii")  # size, correlation_id


class Incomplete(Exception):
    """The buffer ends before the header does; feed more bytes and parse again."""


@dataclass(slots=True, frozen=True)
class RequestHeader:
    """What the proxy reads from every request: the 4-byte size and the request header."""

    size: int  # frame size, not counting the 4 size bytes
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_length: int  # bytes from the start of the frame (size included) to the body
    acks: int | None = None  # Produce only: 0 means the client expects no response
    producer_ids: tuple[int, ...] = ()  # Produce only, when asked for: the distinct producer ids of its record
    #                                      batches, every batch of every partition (produce_prefix)
    only_topic: str | bytes | None = None  # Produce only, when asked for: the topic's name (topic id bytes from
    #                                        v13) when the request writes exactly one topic, else None
    raw: bool = False  # a raw SASL token after SaslHandshake v0: size-prefixed, no Kafka header
    topic_count: int = -1  # Produce only, when asked for: how many topics the request writes (-1: not read)
    replica_id: int = -1  # Fetch v0-14 only: the body's first field, a follower broker's id (>= 0) or -1 for a
    #                       consumer; -1 from v15, whose replica id is a tagged field at the body's end

    @property
    def expects_response(self) -> bool:
        return self.acks != 0

    @property
    def frame_length(self) -> int:
        return self.size + 4


def read_uvarint(buf: Bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; return (value, next position)."""
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise Incomplete
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("varint longer than 5 bytes")


# One tagged field whose size is a one-byte varint (under 128): a tag (a varint of up to 5 bytes), the size, that many
# bytes. _SMALL_FIELDS matches _RUN of them in one call into the regular-expression engine (C), some ten times faster
# than a Python loop: a header at request.header.max.bytes can hold 32,000 empty fields. A field of 128 bytes or
# more (few fit under a limit) or a run the buffer or the limit cuts short goes through read_uvarint.
# Atomic: a run that fails fails at once, never trying a matched field again another way.
_SMALL_FIELD = (
    b"(?>[\\x80-\\xff]{0,4}[\\x00-\\x7f](?:"
    + b"|".join(re.escape(bytes([size])) + (b".{%d}" % size if size else b"") for size in range(128))
    + b"))"
)
_RUN = 64
_SMALL_FIELDS = re.compile(b"%s{%d}" % (_SMALL_FIELD, _RUN), re.DOTALL)


def skip_tagged_fields(buf: Bytes, pos: int, limit: int | None = None) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes each); return the position after it. With
    ``limit``, a section reaching past that position raises :class:`HeaderTooLarge` as soon as it does, and at once
    when its count alone takes it past (each field takes at least two bytes), so the work is bounded by the limit,
    not by the count a client claims."""
    count, pos = read_uvarint(buf, pos)
    if limit is not None and pos + 2 * count > limit:
        raise HeaderTooLarge(pos + 2 * count)
    end = len(buf) if limit is None else min(len(buf), limit)
    while count:
        if count >= _RUN:
            run = _SMALL_FIELDS.match(buf, pos, end)
            if run is not None:
                pos = run.end()
                count -= _RUN
                continue
        for _ in range(min(count, _RUN)):
            if pos + 1 < end and not (buf[pos] | buf[pos + 1]) & 0x80:  # a one-byte tag and size
                pos += 2 + buf[pos + 1]
            else:
                _tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                pos += size
            count -= 1
            if limit is not None and pos > limit:
                raise HeaderTooLarge(pos)
    if pos > len(buf):
        raise Incomplete
    return pos


class HeaderTooLarge(Exception):
    """A request header reaching past ``request.header.max.bytes``."""

    def __init__(self, at_least: int) -> None:
        super().__init__(at_least)
        self.at_least = at_least


MAX_HEADER_BYTES = 65536  # request.header.max.bytes' default
REQUEST_LIMIT_NAME = "socket.request.max.bytes"  # the setting a too-large request names (the C parse's default too)


def frame_size(buf: Bytes, max_size: int, limit_name: str = REQUEST_LIMIT_NAME) -> int:
    """The size prefix of the frame starting at ``buf[0]``, checked against ``max_size`` (the setting
    ``limit_name``, named in the error)."""
    if len(buf) < 4:
        raise Incomplete
    size: int = _INT32.unpack_from(buf, 0)[0]
    if size < 0:
        raise ProtocolError(f"negative frame size {size}")
    if size > max_size:
        if buf[0] == 0x16 and buf[1] == 0x03 and buf[2] <= 0x04:  # a TLS handshake record, not a Kafka size
            raise ProtocolError(
                "a TLS handshake arrived on a plaintext listener (a client configured for SSL? "
                "give this listener a tls section, or the client the plaintext address)"
            )
        raise ProtocolError(f"frame size {size} exceeds {limit_name} {max_size}")
    return size


def parse_request_header(
    buf: Bytes, max_size: int, limit_name: str = REQUEST_LIMIT_NAME, max_header: int = MAX_HEADER_BYTES
) -> RequestHeader:
    """Parse the size and request header at the start of ``buf`` (which may hold more than one frame). A header
    (api key through tagged fields; the 4-byte size before it does not count) longer than ``max_header`` bytes is a
    :class:`ProtocolError`, found before more than ``max_header`` bytes of it are read."""
    return RequestHeader(*request_header_fields(buf, max_size, limit_name, max_header))


def request_header_fields(
    buf: Bytes, max_size: int, limit_name: str = REQUEST_LIMIT_NAME, max_header: int = MAX_HEADER_BYTES
) -> tuple[int, int, int, int, str | None, int]:
    """:func:`parse_request_header`'s fields (size, api_key, api_version, correlation_id, client_id, header_length),
    for a caller that adds more before making the header (a Produce's acks and prefix: one object, not two)."""
    size = frame_size(buf, max_size, limit_name)
    if size < 10:
        raise ProtocolError(f"request frame of {size} bytes is shorter than a request header")
    if len(buf) < _REQUEST_FIXED.size:
        raise Incomplete
    _, api_key, api_version, correlation_id, client_id_len = _REQUEST_FIXED.unpack_from(buf, 0)
    pos = _REQUEST_FIXED.size
    client_id = None
    if client_id_len >= 0:
        end = pos + client_id_len
        if end > max_header + 4:
            raise ProtocolError(
                f"request header over request.header.max.bytes {max_header}: a client_id of {client_id_len} bytes"
            )
        if end > size + 4:
            raise ProtocolError(f"client_id of {client_id_len} bytes runs past the {size}-byte frame")
        if end > len(buf):
            raise Incomplete
        try:
            client_id = str(buf[pos:end], "utf-8")  # from a view: decoded where it lies, its bytes not copied first
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"client_id is not UTF-8: {exc}") from None
        pos = end
    elif client_id_len != -1:
        raise ProtocolError(f"invalid client_id length {client_id_len}")
    if api_version < 0:
        raise ProtocolError(f"negative api_version {api_version}")
    if request_header_version(api_key, api_version) >= 2:
        if pos < size + 4 and pos < len(buf) and not buf[pos] and pos < max_header + 4:
            pos += 1  # no tagged fields (the usual case): what skip_tagged_fields finds, without its work
        else:
            try:
                pos = skip_tagged_fields(within_frame(buf, size), pos, max_header + 4)
            except HeaderTooLarge as exc:
                raise ProtocolError(
                    f"request header over request.header.max.bytes {max_header}: its tagged "
                    f"fields make it {exc.at_least - 4} bytes at least"
                ) from None
    if pos > size + 4:
        raise ProtocolError("request header runs past the end of its frame")
    return size, api_key, api_version, correlation_id, client_id, pos


@dataclass(slots=True, frozen=True)
class ResponseHeader:
    """What the proxy reads from every response before matching it to its request."""

    size: int
    correlation_id: int
    raw: bool = False  # a raw SASL token after SaslHandshake v0: size-prefixed, no correlation id

    @property
    def frame_length(self) -> int:
        return self.size + 4


def pure_parse_response_prefix(buf: Bytes, max_size: int = 2**31 - 1) -> ResponseHeader:
    """The size and correlation id of the response frame at the start of ``buf``.

    A frame too short for its correlation id, or larger than ``max_size`` (``upstream.response.max.bytes``), is a
    protocol error: responses are bounded like requests.
    """
    if len(buf) < 4:
        raise Incomplete
    (size,) = _INT32.unpack_from(buf, 0)
    if size < 4:
        raise ProtocolError(f"response frame of {size} bytes is shorter than a response header")
    if size > max_size:
        raise ProtocolError(f"response frame size {size} exceeds upstream.response.max.bytes {max_size}")
    if len(buf) < 8:
        raise Incomplete
    return ResponseHeader(*_RESPONSE_FIXED.unpack_from(buf, 0))


def parse_raw_sasl_request(buf: Bytes, max_size: int) -> RequestHeader:
    """A raw SASL token frame from the client (after SaslHandshake v0): just its size."""
    if len(buf) < 4:
        raise Incomplete
    (size,) = _INT32.unpack_from(buf, 0)
    if size < 0 or size > max_size:
        raise ProtocolError(f"raw SASL token of {size} bytes (at most {max_size} before authentication)")
    return RequestHeader(size, SASL_AUTHENTICATE, -1, -1, None, 4, raw=True)


def parse_raw_sasl_response(buf: Bytes, max_size: int) -> ResponseHeader:
    """A raw SASL token frame from the broker (after SaslHandshake v0): just its size, which may be 0."""
    if len(buf) < 4:
        raise Incomplete
    (size,) = _INT32.unpack_from(buf, 0)
    if size < 0 or size > max_size:
        raise ProtocolError(f"raw SASL token of {size} bytes from the broker")
    return ResponseHeader(size, -1, raw=True)


def within_frame(buf: Bytes, size: int) -> Bytes:
    """View of ``buf`` cut at the frame end, so header parsing never reads into the next frame."""
    end = size + 4
    if len(buf) > end:
        return memoryview(buf)[:end]
    return buf


def pure_response_header_length(api_key: int, api_version: int, frame: Bytes) -> int:
    """Bytes from the start of a whole response frame (size included) to its body."""
    if response_header_version(api_key, api_version) >= 1:
        if len(frame) > 8 and not frame[8]:
            return 9  # no tagged fields (the usual case): what skip_tagged_fields finds, without its work
        try:
            return skip_tagged_fields(frame, 8)
        except Incomplete:
            raise ProtocolError("response header tagged fields run past the frame") from None
    return 8


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """The request header (without the size prefix) in the header version the API version calls for."""
    if client_id is None:
        cid = _INT16.pack(-1)
    else:
        raw = client_id.encode("utf-8")
        cid = _INT16.pack(len(raw)) + raw
    head = struct.pack(">hhi", api_key, api_version, correlation_id) + cid
    if request_header_version(api_key, api_version) >= 2:
        head += b"\x00"
    return head


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """The response header (without the size prefix); header v1 has an empty tagged-field section."""
    head = _INT32.pack(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        head += b"\x00"
    return head


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its 4-byte size."""
    return _INT32.pack(len(payload)) + payload


# The C extension's versions where it is in use (proxy/codec/accel.py), the pure ones above otherwise.
if NATIVE is not None:
    NATIVE.configure_header(ProtocolError, Incomplete, RequestHeader, ResponseHeader, FLEXIBLE_SINCE)
parse_response_prefix = choose("parse_response_prefix", pure_parse_response_prefix)
response_header_length = choose("response_header_length", pure_response_header_length)
