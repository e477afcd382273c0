"""The NodeEndpoints tagged field of a Produce (v10+) or Fetch (v16+) response rewritten in place (KIP-951), the rest
of the response copied as it is, never decoded.

A broker sends NodeEndpoints when a partition's leader moved (Kafka: with NOT_LEADER_OR_FOLLOWER, so during every
rolling restart; some brokers, Tansu among them, in every response). The field is a top-level tagged field, the last
bytes of the body: the brokers' addresses in it are all cluster mode must change. Decoding the whole response to
change them builds every topic, partition and (for a Fetch) copies every record batch, then encodes it all again: a
Fetch of a few MB copied twice to change a few host names. Here only the field is read and written again: the body
before it and the tagged fields after it are copied as they are.

Bytes in, bytes out, no I/O. :func:`rewrite_tagged_endpoints` answers :data:`UNUSUAL` for anything not laid out
the plain way (a null array or host, a length or count not in its shortest form, tagged fields inside an endpoint,
a host that is not UTF-8, bytes left over):
the caller then decodes the whole response as before, so such a body gets the decoder's own answer or error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from proxy.codec.errors import ProtocolError
from proxy.codec.header import HeaderTooLarge, Incomplete
from proxy.codec.primitives import Bytes, read_uvarint, write_uvarint

Advertise = Callable[[int, str, int], tuple[str, int]]  # (node id, host, port) -> the (host, port) clients get


class Unusual:
    """The type of :data:`UNUSUAL`."""

    __slots__ = ()


UNUSUAL = Unusual()
"""What :func:`rewrite_tagged_endpoints` answers for a field it leaves to the full decoder."""

_INT32 = struct.Struct(">i")


def rewrite_tagged_endpoints(body: Bytes, start: int, end: int, advertise: Advertise) -> bytes | Unusual | None:
    """``body`` with the NodeEndpoints whose data is ``body[start:end]`` (a compact array of NodeEndpoint, as
    :func:`proxy.codec.skim.tagged_fields` finds it) rewritten by ``advertise``; None when every address stays
    as it is (the broker's bytes go back unchanged); :data:`UNUSUAL` when the caller must decode the whole body."""
    try:
        rewritten = _endpoints(body, start, end, advertise)
    except (ProtocolError, HeaderTooLarge, Incomplete, IndexError, struct.error, UnicodeDecodeError):
        return UNUSUAL
    if not isinstance(rewritten, bytes):  # None or UNUSUAL
        return rewritten
    size = write_uvarint(end - start)
    at = start - len(size)
    if at < 0 or bytes(body[at:start]) != size:  # the size not in its shortest form: left to the decoder
        return UNUSUAL
    return b"".join((body[:at], write_uvarint(len(rewritten)), rewritten, body[end:]))


def _shortest(body: Bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint and the position after it, raising ProtocolError where it is not in its shortest form:
    kept as it is, it would differ from what the decoder writes back (a rack's length 0x81 0x00 is the decoder's
    0x01)."""
    value, after = read_uvarint(body, pos)
    if after - pos != len(write_uvarint(value)):
        raise ProtocolError(f"a varint at {pos} not in its shortest form")
    return value, after


def _endpoints(body: Bytes, pos: int, end: int, advertise: Advertise) -> bytes | Unusual | None:
    """The field's data rewritten; None if unchanged; UNUSUAL if not laid out the plain way. Read whole before any
    address is advertised: a field left to the decoder has told ``advertise`` nothing."""
    count, pos = _shortest(body, pos)
    if count == 0:  # null: not what a broker sends for this non-nullable array
        return UNUSUAL
    nodes: list[tuple[int, str, int, Bytes]] = []
    for _ in range(count - 1):
        node_id = _INT32.unpack_from(body, pos)[0]
        pos += 4
        length, pos = _shortest(body, pos)
        if length == 0 or pos + length - 1 > end:  # a null host, or one past the field
            return UNUSUAL
        host = bytes(body[pos : pos + length - 1]).decode("utf-8")
        pos += length - 1
        port = _INT32.unpack_from(body, pos)[0]
        pos += 4
        kept_from = pos  # the rack and the element's tagged fields, kept as they are
        rack, pos = _shortest(body, pos)
        if rack:  # read as the decoder reads it (UTF-8), though kept as it is
            bytes(body[pos : pos + rack - 1]).decode("utf-8")
            pos += rack - 1
        tags, pos = _shortest(body, pos)  # the element's own tagged fields: none is defined, and the decoder
        if tags or pos > end:  # writes back none of those it does not know; or the rack past the field
            return UNUSUAL
        nodes.append((node_id, host, port, body[kept_from:pos]))
    if pos != end:  # bytes left over in the field
        return UNUSUAL
    out: list[Bytes] = [write_uvarint(count)]
    changed = False
    for node_id, host, port, rest in nodes:
        new_host, new_port = (host, port) if node_id < 0 else advertise(node_id, host, port)  # -1: no node
        changed = changed or (new_host, new_port) != (host, port)
        encoded = new_host.encode("utf-8")
        out += (_INT32.pack(node_id), write_uvarint(len(encoded) + 1), encoded, _INT32.pack(new_port), rest)
    return b"".join(out) if changed else None
