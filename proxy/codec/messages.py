"""Decode and encode request and response bodies of the APIs the proxy needs to understand.

``body`` is always the bytes after the request or response header. Decoding raises only
:class:`ProtocolError` (truncation, bad lengths, invalid UTF-8, trailing bytes, a version we do not
decode). Messages carry Kafka's field names in snake_case, for example a Produce v9 request::

    msg = decode_request(0, 9, body)
    msg.acks, msg.timeout_ms, msg.transactional_id
    msg.topic_data[i].name, msg.topic_data[i].partition_data[j].index
    msg.topic_data[i].partition_data[j].records      # memoryview into ``body``, never copied

Decode then encode reproduces the input byte for byte, including unknown tagged fields (kept in
each struct's ``_unknown_tags``). Every top-level class declares ``API_KEY``, ``DIRECTION`` and
``VALID_VERSIONS``.
"""

from __future__ import annotations

import struct
from typing import Any

from proxy.codec import schema
from proxy.codec.apis import API_VERSIONS, api_name
from proxy.codec.compiler import codec
from proxy.codec.error_codes import UNSUPPORTED_VERSION
from proxy.codec.errors import ProtocolError
from proxy.codec.schema import Message

__all__ = [
    "DECODED_APIS",
    "Message",
    "ProtocolError",
    "api_versions_unsupported_body",
    "decode_api_versions_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "message_class",
    "new_request",
    "new_response",
]

#: APIs the codec has only for the proxy's own requests (volume usage from DescribeLogDirs, a delegation token's owner
#: from DescribeDelegationToken, whether a transactional id is known from DescribeTransactions): clients' requests of
#: these APIs pass through as opaque bytes, in every version the broker speaks.
OWN_REQUESTS_ONLY = frozenset({35, 41, 65})

#: api_key -> (min_version, max_version) that we decode and encode on the client path, requests and responses alike.
DECODED_APIS: dict[int, tuple[int, int]] = {
    key: versions for key, versions in schema.decoded_ranges("request").items() if key not in OWN_REQUESTS_ONLY
}

_DECODE_ERRORS = (
    struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
    OverflowError,
    TypeError,
    RecursionError,
    MemoryError,
)

for (_key, _direction), _segs in schema._SEGMENTS.items():
    for _seg in _segs:
        _seg.cls.API_KEY = _key
        _seg.cls.DIRECTION = _direction
        _seg.cls.VALID_VERSIONS = _seg.valid


def _codec(api_key: int, version: int, direction: str) -> tuple[Any, ...]:
    found = codec(api_key, direction, version)
    if found is None:
        raise ProtocolError(f"cannot decode {api_name(api_key)} v{version} {direction}")
    return found


def _as_view(body: bytes | bytearray | memoryview) -> memoryview:
    mv = body if isinstance(body, memoryview) else memoryview(body)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def _decode(api_key: int, version: int, body: bytes | memoryview, direction: str) -> Message:
    reader, _writer, _cls = _codec(api_key, version, direction)
    mv = _as_view(body)
    try:
        msg, pos = reader(mv, 0)
    except ProtocolError as exc:
        raise ProtocolError(f"malformed {api_name(api_key)} v{version} {direction}: {exc}") from None
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed {api_name(api_key)} v{version} {direction}: {exc!r}") from None
    if pos != len(mv):
        raise ProtocolError(
            f"{api_name(api_key)} v{version} {direction}: {len(mv) - pos} trailing bytes after the message"
        )
    decoded: Message = msg
    return decoded


def _encode(api_key: int, version: int, msg: Message, direction: str) -> bytes:
    _reader, writer, cls = _codec(api_key, version, direction)
    if type(msg) is not cls:
        raise TypeError(f"expected a {cls.__name__}, got {type(msg).__name__}")
    out: list[Any] = []
    try:
        writer(msg, out)
    except (struct.error, AttributeError, OverflowError) as exc:
        raise ValueError(f"cannot encode {api_name(api_key)} v{version} {direction}: {exc}") from exc
    return b"".join(out)


def decode_request(api_key: int, version: int, body: bytes | memoryview) -> Message:
    """Decode a request body (the bytes after the request header)."""
    return _decode(api_key, version, body, "request")


def decode_response(api_key: int, version: int, body: bytes | memoryview) -> Message:
    """Decode a response body (the bytes after the response header)."""
    return _decode(api_key, version, body, "response")


def encode_request(api_key: int, version: int, msg: Message) -> bytes:
    """Encode a request body; ValueError if a field cannot be expressed in ``version``."""
    return _encode(api_key, version, msg, "request")


def encode_response(api_key: int, version: int, msg: Message) -> bytes:
    """Encode a response body; ValueError if a field cannot be expressed in ``version``."""
    return _encode(api_key, version, msg, "response")


def message_class(api_key: int, version: int, direction: str = "request") -> type[Message]:
    """The top-level Message class for an API version (nested classes: ``cls._children``)."""
    cls: type[Message] = _codec(api_key, version, direction)[2]
    return cls


def new_request(api_key: int, version: int, **fields: Any) -> Message:
    """A request with Kafka's defaults, overridden by ``fields`` (nested values may be dicts)."""
    return message_class(api_key, version, "request")(**fields)


def new_response(api_key: int, version: int, **fields: Any) -> Message:
    """A response with Kafka's defaults, overridden by ``fields`` (nested values may be dicts)."""
    return message_class(api_key, version, "response")(**fields)


# --------------------------------------------------------------------------------------------
# ApiVersions: a broker that does not support the client's version answers with a v0 body.


def decode_api_versions_response(version: int, body: bytes | memoryview) -> Message:
    """Decode an ApiVersions response, falling back to v0 as Kafka clients do.

    The broker answers UNSUPPORTED_VERSION (35) with a v0 body whatever version was asked; so if
    parsing at ``version`` fails, or yields error_code 35, the body is parsed as v0. If both fail
    the first error is raised.
    """
    try:
        msg = decode_response(API_VERSIONS, version, body)
    except ProtocolError as exc:
        if version == 0:
            raise
        try:
            return decode_response(API_VERSIONS, 0, body)
        except ProtocolError:
            raise exc from None
    if msg.error_code == UNSUPPORTED_VERSION and version != 0:
        try:
            return decode_response(API_VERSIONS, 0, body)
        except ProtocolError:
            return msg
    return msg


def api_versions_unsupported_body(min_version: int = 0, max_version: int = 4) -> bytes:
    """The v0 ApiVersions response body a broker sends for an unsupported request version.

    error_code is UNSUPPORTED_VERSION and the one entry tells the client which ApiVersions
    versions to retry with.
    """
    msg = new_response(
        API_VERSIONS,
        0,
        error_code=UNSUPPORTED_VERSION,
        api_keys=[{"api_key": API_VERSIONS, "min_version": min_version, "max_version": max_version}],
    )
    return encode_response(API_VERSIONS, 0, msg)
