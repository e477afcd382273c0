"""A message body skimmed, not decoded: its top-level tagged fields found, where a leading fixed field sits, and the
length of a top-level array.

A decision that needs one fact of a large message (does this Produce or Fetch response carry ``NodeEndpoints``,
KIP-951, or this ShareFetch one a non-empty list of them, KIP-932; is this Fetch a follower's, KIP-903; what is its
``MaxBytes``) need not build every struct of it. Each (API, direction, version) of the schema table is turned once
into a list of steps, consecutive fixed-size fields merged into one skip, and a body is walked by those steps:
lengths and counts are read, nothing is built or copied.
The walk checks what the decoder checks of the layout (every length within the body, no bytes left over), so a body
that skims is one the decoder reads field for field the same way; one that does not raises :class:`ProtocolError`.

Bytes in, values out, no I/O.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from functools import cache
from typing import Any

from proxy.codec import schema
from proxy.codec.accel import NATIVE, choose
from proxy.codec.errors import ProtocolError
from proxy.codec.header import Incomplete, skip_tagged_fields
from proxy.codec.primitives import FIXED, INT16, INT32, Bytes, read_uvarint

# A step: (what, argument, element size). What a step skips:
_RUN = 0  # fixed-size fields: argument bytes
_VARIABLE = 1  # a string, bytes or records: its length (argument: the width of a non-compact length, 2 or 4)
_STRUCT = 2  # a struct: argument its steps
_NULLABLE_STRUCT = 3  # an int8 marker (-1: null), then the struct
_ARRAY = 4  # a count, then that many elements: argument their steps, or element size their fixed size
_TAGS = 5  # a struct's tagged-field section (flexible versions)

Steps = tuple[tuple[int, Any, int], ...]
_INLINED = 4  # levels of arrays (and nullable structs) inlined in one skipper, two nested blocks each


def _size(kind: str) -> int:
    """The width of a fixed-size kind; 0 for a variable one."""
    if kind in FIXED:
        return FIXED[kind][1]
    return 16 if kind == "uuid" else 0


def _steps(fields: tuple[Any, ...], version: int, flexible: bool) -> Steps:
    steps: list[tuple[int, Any, int]] = []
    run = 0
    for field in fields:
        name, kind, versions, nullable_versions, tag = field[0], field[1], field[2], field[3], field[4]
        if not versions[0] <= version <= versions[1] or tag is not None:
            continue  # absent in this version, or in the tagged-field section
        size = _size(kind)
        if size:
            run += size
            continue
        if run:
            steps.append((_RUN, run, 0))
            run = 0
        nullable = nullable_versions is not None and nullable_versions[0] <= version <= nullable_versions[1]
        if kind in ("string", "bytes", "records"):
            steps.append((_VARIABLE, 2 if kind == "string" else 4, 0))
        elif kind == "struct":
            steps.append((_NULLABLE_STRUCT if nullable else _STRUCT, _steps(field[8], version, flexible), 0))
        elif kind == "[]struct":
            steps.append((_ARRAY, _steps(field[8], version, flexible), 0))
        elif kind.startswith("[]"):
            element = kind[2:]
            width = _size(element)
            inner: Steps = () if width else ((_VARIABLE, 2 if element == "string" else 4, 0),)
            steps.append((_ARRAY, inner, width))
        else:
            raise ValueError(f"{name}: no skim for fields of kind {kind}")
    if run:
        steps.append((_RUN, run, 0))
    if flexible:
        steps.append((_TAGS, None, 0))
    return tuple(steps)


def _top_steps(api_key: int, direction: str, version: int) -> tuple[Steps, bool]:
    """(the steps of the top level's fields, its tagged-field section left out; whether the version is flexible)."""
    seg = schema.segment(api_key, direction, version)
    if seg is None:
        raise ProtocolError(f"no schema for {direction} {api_key} v{version}")
    flexible = seg.flexible is not None and version >= seg.flexible
    steps = _steps(seg.fields, version, flexible)
    return (steps[:-1] if flexible else steps), flexible


@cache
def _plan(api_key: int, direction: str, version: int) -> tuple[Callable[[Bytes, int], int], bool]:
    """(the skipper of :func:`_top_steps`; whether the version is flexible)."""
    steps, flexible = _top_steps(api_key, direction, version)
    return _Skippers(flexible).compile(steps), flexible


class _Skippers:
    """Steps turned into Python source once (as :mod:`proxy.codec.compiler` turns the schema into readers): one
    function, ``skip(buf, pos)`` returning where the top level's fields end; a step is a few lines, not a call, and
    the structs inside (an array's elements too) are inlined."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.source: list[str] = []
        self.names: dict[str, Any] = {
            "_PE": ProtocolError,
            "_uv": read_uvarint,
            "_i16": INT16.unpack_from,
            "_i32": INT32.unpack_from,
            "_tags": skip_tagged_fields,
        }
        self.count = 0

    def compile(self, steps: Steps) -> Callable[[Bytes, int], int]:
        name = self._function(steps)
        exec("\n".join(self.source), self.names)  # source made here from the schema table alone
        skip: Callable[[Bytes, int], int] = self.names[name]
        return skip

    def _function(self, steps: Steps) -> str:
        self.count += 1
        name = f"skip_{self.count}"
        lines = [f"def {name}(buf, pos):", *self._body(steps, "    ")]
        lines += ["    if pos > len(buf):", "        raise _PE('fields run past the end')", "    return pos"]
        self.source += lines
        return name

    def _body(self, steps: Steps, indent: str, depth: int = 0) -> list[str]:
        """Source skipping ``steps`` at ``indent``: a struct's fields, an array's elements inlined in its loop (a
        call per element would cost more than the element's few lines); past :data:`_INLINED` levels of arrays, a
        call (Python allows 20 nested blocks)."""
        lines: list[str] = []
        for what, argument, width in steps:
            if what == _RUN:
                lines.append(f"pos += {argument}")
            elif what == _VARIABLE:
                lines += self._length(argument)
                lines += ["if n > 0:", "    pos += n", "elif n < -1:", "    raise _PE('invalid length')"]
            elif what == _TAGS:
                lines += ["if buf[pos]:", "    pos = _tags(buf, pos)", "else:", "    pos += 1"]
            elif what == _ARRAY:
                lines += self._length(4)
                lines += ["if n > 0:", "    if n > len(buf) - pos:", "        raise _PE('array too long')"]
                if width:
                    lines.append(f"    pos += n * {width}")
                else:
                    lines.append("    for _ in range(n):")
                    if depth < _INLINED:
                        lines += self._body(argument, "        ", depth + 1) or ["        pass"]
                    else:
                        lines.append(f"        pos = {self._function(argument)}(buf, pos)")
                lines += ["elif n < -1:", "    raise _PE('invalid array length')"]
            elif what == _STRUCT:
                lines += self._body(argument, "", depth)
            else:  # _NULLABLE_STRUCT: an int8 marker, negative for null
                lines += ["pos += 1", "if buf[pos - 1] < 128:"]
                lines += self._body(argument, "    ", depth + 1) or ["    pass"]
        return [indent + line for line in lines]

    def _length(self, width: int) -> list[str]:
        """Source setting ``n`` to the length or count at ``pos`` (-1: null) and ``pos`` past it."""
        if self.flexible:  # compact: an unsigned varint, one more than the length; one byte, the usual case
            return [
                "n = buf[pos] - 1",
                "if n < 127:",
                "    pos += 1",
                "else:",
                "    n, pos = _uv(buf, pos)",
                "    n -= 1",
            ]
        return [f"n, = _i{8 * width}(buf, pos)", f"pos += {width}"]


def pure_tagged_fields(api_key: int, direction: str, version: int, body: Bytes) -> dict[int, tuple[int, int]]:
    """The top-level tagged fields of a whole ``body``: tag -> (start, end) of its data in ``body`` ({} in a version
    without them). Raises :class:`ProtocolError` when the body is not laid out as its version says."""
    skip, flexible = _plan(api_key, direction, version)
    end = len(body)
    try:
        pos = skip(body, 0)
        found: dict[int, tuple[int, int]] = {}
        if flexible:
            if pos < end and not body[pos]:
                pos += 1  # none: the usual case
            else:
                count, pos = read_uvarint(body, pos)
                if count > end - pos:
                    raise ProtocolError(f"{count} tagged fields in the {end - pos} bytes left")
                for _ in range(count):
                    tag, pos = read_uvarint(body, pos)
                    size, pos = read_uvarint(body, pos)
                    found[tag] = (pos, pos + size)
                    pos += size
                    if pos > end:
                        raise ProtocolError(f"tagged field {tag} of {size} bytes runs past the end ({end})")
    except (Incomplete, IndexError, struct.error):
        raise ProtocolError(f"{direction} {api_key} v{version} ends inside a field") from None
    if pos != end:
        raise ProtocolError(f"{direction} {api_key} v{version}: {end - pos} bytes left after its fields")
    return found


def pure_array_count(api_key: int, direction: str, version: int, name: str, body: Bytes) -> int:
    """The number of elements of the top-level array ``name`` in ``body`` (-1: null), the fields before it skimmed.
    Raises :class:`ProtocolError` when the body ends before it, ValueError if ``name`` is no array of that version."""
    skip, flexible = _prefix(api_key, direction, version, name)
    try:
        pos = skip(body, 0)
        if flexible:
            count, _ = read_uvarint(body, pos)
            return count - 1
        (count,) = INT32.unpack_from(body, pos)
    except (Incomplete, IndexError, struct.error):
        raise ProtocolError(f"{direction} {api_key} v{version} ends before its {name}") from None
    return int(count)


def _prefix_steps(api_key: int, direction: str, version: int, name: str) -> tuple[Steps, bool]:
    """(the steps of the top-level fields before the array ``name``; whether the version is flexible)."""
    seg = schema.segment(api_key, direction, version)
    fields = () if seg is None else seg.fields
    before: list[Any] = []
    for field in fields:
        if field[0] == name and field[1].startswith("[]") and field[4] is None:
            if not field[2][0] <= version <= field[2][1]:
                break
            flexible = seg is not None and seg.flexible is not None and version >= seg.flexible
            steps = _steps(tuple(before), version, flexible)
            return (steps[:-1] if flexible else steps), flexible
        before.append(field)
    raise ValueError(f"{name} is not an array of {direction} {api_key} v{version}")


@cache
def _prefix(api_key: int, direction: str, version: int, name: str) -> tuple[Callable[[Bytes, int], int], bool]:
    """(the skipper of :func:`_prefix_steps`; whether the version is flexible)."""
    steps, flexible = _prefix_steps(api_key, direction, version, name)
    return _Skippers(flexible).compile(steps), flexible


@cache
def tag_of(api_key: int, direction: str, version: int, name: str) -> int:
    """The tag of the top-level tagged field ``name`` in ``version`` (ValueError if it is not one there)."""
    seg = schema.segment(api_key, direction, version)
    for field in () if seg is None else seg.fields:
        if field[0] == name and field[4] is not None and field[5] is not None and field[5][0] <= version <= field[5][1]:
            tag: int = field[4]
            return tag
    raise ValueError(f"{name} is not a tagged field of {direction} {api_key} v{version}")


@cache
def fixed_offset(api_key: int, direction: str, version: int, name: str) -> int:
    """Where the top-level field ``name`` starts in every body of ``version``: only fixed-size fields come before it
    (ValueError otherwise, or if it is not a fixed-size field of that version)."""
    seg = schema.segment(api_key, direction, version)
    offset = 0
    for field in () if seg is None else seg.fields:
        versions, tag = field[2], field[4]
        if not versions[0] <= version <= versions[1] or tag is not None:
            continue
        size = _size(field[1])
        if field[0] == name and size:
            return offset
        if not size:
            break
        offset += size
    raise ValueError(f"{name} is not at a fixed place in {direction} {api_key} v{version}")


# The C extension's program (proxy/codec/native/skim.c): (operation, argument) pairs of int32, a struct's steps inline,
# an array's elements or a nullable struct's fields after it, their length (in int32s) its argument.
_OP_RUN, _OP_VARIABLE, _OP_TAGS, _OP_ARRAY_FIXED, _OP_ARRAY, _OP_ARRAY_CALL, _OP_NULLABLE = range(7)


def _encode(steps: Steps, depth: int = 0) -> list[int]:
    """``steps`` as the C extension walks them, levels counted as :meth:`_Skippers._body` counts them: an array past
    :data:`_INLINED` levels is a call there, checking where each element ends (``_OP_ARRAY_CALL``)."""
    out: list[int] = []
    for what, argument, width in steps:
        if what == _RUN:
            out += (_OP_RUN, argument)
        elif what == _VARIABLE:
            out += (_OP_VARIABLE, argument)
        elif what == _TAGS:
            out += (_OP_TAGS, 0)
        elif what == _ARRAY and width:
            out += (_OP_ARRAY_FIXED, width)
        elif what == _ARRAY:
            inner = _encode(argument, depth + 1) if depth < _INLINED else _encode(argument)
            out += (_OP_ARRAY if depth < _INLINED else _OP_ARRAY_CALL, len(inner), *inner)
        elif what == _STRUCT:
            out += _encode(argument, depth)
        else:  # _NULLABLE_STRUCT
            inner = _encode(argument, depth + 1)
            out += (_OP_NULLABLE, len(inner), *inner)
    return out


def _program(make: Callable[..., tuple[Steps, bool]]) -> Callable[..., tuple[bytes, bool]]:
    """``make`` (:func:`_top_steps` or :func:`_prefix_steps`) returning the C program instead of the steps."""

    def program(*key: Any) -> tuple[bytes, bool]:
        steps, flexible = make(*key)
        return array("i", _encode(steps)).tobytes(), flexible

    return program


# The C extension's versions where it is in use (proxy/codec/accel.py), the pure ones above otherwise: the C walks
# the same steps, encoded once per (API, direction, version) by _program.
if NATIVE is not None:
    NATIVE.configure_skim(_program(_top_steps), _program(_prefix_steps))
tagged_fields = choose("tagged_fields", pure_tagged_fields)
array_count = choose("array_count", pure_array_count)
