"""A Metadata response's head: everything before its topics, so the brokers can be rewritten and the topics passed on
as the broker's own bytes.

Every version of MetadataResponse.json puts the topics after ``ThrottleTimeMs`` (v3+), ``Brokers`` (node id, host,
port, ``Rack`` v1+, tagged fields v9+), ``ClusterId`` (v2+) and ``ControllerId`` (v1+); flexible versions (v9+)
write compact arrays and strings. :func:`topics_offset` walks that head without building anything;
:func:`decode_head` decodes it alone (the head followed by an empty topics array and the fields after it, as an
empty answer of that version has them) and :func:`encode_head` writes it back. The head is self-delimiting, so the
same bytes always end at the same place.

Bytes in, values out, no I/O; a head that runs past the body raises :class:`~proxy.codec.errors.ProtocolError`.
"""

from __future__ import annotations

from functools import cache

from proxy.codec.apis import METADATA
from proxy.codec.errors import ProtocolError
from proxy.codec.messages import Message, decode_response, encode_response, new_response
from proxy.codec.primitives import INT16, INT32, Bytes, check_count, check_span, read_tag_header, read_uvarint

FLEXIBLE_SINCE = 9  # MetadataResponse.json: "flexibleVersions": "9+"


def topics_offset(version: int, body: Bytes) -> int:
    """Where the topics array of a Metadata response ``body`` of ``version`` begins."""
    flexible = version >= FLEXIBLE_SINCE
    pos = check_span(body, 0, 4, "throttle_time_ms") if version >= 3 else 0
    if flexible:
        count, pos = read_uvarint(body, pos)
        count -= 1
    else:
        check_span(body, pos, 4, "brokers")
        count, pos = INT32.unpack_from(body, pos)[0], pos + 4
    if count < 0:
        raise ProtocolError("a Metadata response with a null brokers array")
    check_count(body, pos, count, "brokers")
    for _ in range(count):
        pos = check_span(body, pos, 4, "node_id")
        pos = _skip_string(body, pos, flexible, "host")
        pos = check_span(body, pos, 4, "port")
        if version >= 1:
            pos = _skip_string(body, pos, flexible, "rack")
        if flexible:
            pos = _skip_tags(body, pos)
    if version >= 2:
        pos = _skip_string(body, pos, flexible, "cluster_id")
    if version >= 1:
        pos = check_span(body, pos, 4, "controller_id")
    return pos


def decode_head(version: int, head: bytes) -> Message:
    """The response whose head is ``head`` (``body[:topics_offset(version, body)]``), with no topics."""
    return decode_response(METADATA, version, head + _empty_tail(version))


def encode_head(version: int, msg: Message) -> bytes:
    """``msg``'s head, as :func:`decode_head` read it (its topics are not written)."""
    tail = _empty_tail(version)
    msg.topics = []
    body = encode_response(METADATA, version, msg)
    return body[: len(body) - len(tail)]


@cache
def _empty_tail(version: int) -> bytes:
    """What follows the head in an answer with no topics: the empty array, and the fields after it."""
    empty = encode_response(METADATA, version, new_response(METADATA, version))
    return empty[topics_offset(version, empty) :]


def _skip_string(body: Bytes, pos: int, flexible: bool, what: str) -> int:
    if flexible:
        length, pos = read_uvarint(body, pos)
        return check_span(body, pos, max(length - 1, 0), what)
    check_span(body, pos, 2, what)
    length = INT16.unpack_from(body, pos)[0]
    return check_span(body, pos + 2, max(length, 0), what)


def _skip_tags(body: Bytes, pos: int) -> int:
    count, pos = read_uvarint(body, pos)
    check_count(body, pos, count, "tagged fields")
    for _ in range(count):
        _, _, pos = read_tag_header(body, pos)
    return pos
