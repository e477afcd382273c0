"""Kafka's wire primitives: fixed-width big-endian integers, unsigned varints, UUIDs, tagged fields.

The compiled readers and writers in :mod:`proxy.codec.schema` call these on a ``memoryview`` of
the whole message body with an explicit position; each reader returns ``(value, new_pos)``.
Readers raise only :class:`ProtocolError`; struct/index errors from the fixed-width unpackers are
turned into it by the caller at the top of a decode.
"""

from __future__ import annotations

import struct
import uuid

from proxy.codec.errors import ProtocolError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

#: struct format letter and width of each fixed-width Kafka type.
FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "bool": ("?", 1),
}

ZERO_UUID = uuid.UUID(int=0)

Bytes = bytes | bytearray | memoryview  # what the codec reads from: a frame, a buffer, or a view into one

_VARINT_ONE_BYTE = [bytes([i]) for i in range(128)]


def read_uvarint(buf: Bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (a 32-bit value), as Kafka writes lengths and tags."""
    try:
        b = buf[pos]
    except IndexError:
        raise ProtocolError(f"truncated varint at offset {pos}") from None
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if shift > 28:
            raise ProtocolError(f"varint longer than 5 bytes at offset {pos}")
        try:
            b = buf[pos]
        except IndexError:
            raise ProtocolError(f"truncated varint at offset {pos}") from None
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFF:
                raise ProtocolError("varint exceeds 32 bits")
            return value, pos
        shift += 7


def write_uvarint(value: int) -> bytes:
    """Encode ``value`` (0 <= value < 2**32) as an unsigned varint."""
    if 0 <= value < 128:
        return _VARINT_ONE_BYTE[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    """A 16-byte UUID (Kafka's topic ids)."""
    end = pos + 16
    if end > len(buf):
        raise ProtocolError(f"truncated uuid at offset {pos}")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def check_span(buf: Bytes, pos: int, n: int, what: str) -> int:
    """Return ``pos + n`` if ``n`` bytes are available at ``pos``, else raise ProtocolError."""
    if n < 0:
        raise ProtocolError(f"negative length {n} for {what} at offset {pos}")
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"{what} of {n} bytes at offset {pos} runs past the end ({len(buf)})")
    return end


def check_count(buf: Bytes, pos: int, n: int, what: str) -> None:
    """Bound an array length by the bytes left: each element takes at least one byte."""
    if n > len(buf) - pos:
        raise ProtocolError(f"{what} claims {n} elements but only {len(buf) - pos} bytes remain")


def read_tag_header(buf: Bytes, pos: int) -> tuple[int, int, int]:
    """One tagged field's ``(tag, data_start, data_end)``; the data span is bounds-checked."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    return tag, pos, check_span(buf, pos, size, f"tagged field {tag}")


def write_tagged(out: list[bytes], known: list[tuple[int, bytes]], unknown: dict[int, bytes]) -> None:
    """Append a tagged-field section: known and preserved unknown tags, in ascending tag order."""
    if unknown:
        items = sorted([*known, *unknown.items()])
    elif not known:
        out.append(b"\x00")
        return
    else:
        items = known
    out.append(write_uvarint(len(items)))
    for tag, data in items:
        out.append(write_uvarint(tag))
        out.append(write_uvarint(len(data)))
        out.append(data)
