"""Message classes and schema segments; :mod:`proxy.codec.compiler` makes one specialised reader and writer per
struct and version from them.

:data:`proxy.codec.schema_table.SCHEMAS` describes each decoded API's request and response as
Kafka does. For each ``(api_key, direction, version)`` the compiler generates Python source for a reader
``(buf, pos) -> (Message, pos)`` and a writer ``(msg, out_list) -> None`` per struct, compile it
once (on first use) and cache it, so a decode does no schema interpretation: it is straight-line
``struct.unpack_from`` calls, with consecutive fixed-width fields merged into one unpack, and
``records`` kept as ``memoryview`` slices of the input (never copied).

Field conventions (Kafka's semantics): a field absent in a version holds its default; encoding a
non-default value in a version that lacks a non-``ignorable`` field raises ``ValueError``, as Kafka
raises UnsupportedVersionException. Tagged fields equal to their default are not written. Unknown
tagged fields are kept in ``msg._unknown_tags`` ({tag: raw bytes}) and written back unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from proxy.codec import primitives as P
from proxy.codec.schema_table import SCHEMAS

_ARRAY = "[]"


class Message:
    """A decoded Kafka struct: attributes named in snake_case after Kafka's field names.

    Every field of the struct's definition is an attribute in every version; fields the version
    lacks hold Kafka's default. Nested structs are Messages, arrays are lists, ``records`` are
    ``memoryview`` (or ``None``), UUIDs are :class:`uuid.UUID`.
    """

    __slots__ = ("_unknown_tags",)
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    _children: dict[str, type[Message]] = {}
    # set on every top-level class by proxy.codec.messages
    API_KEY: ClassVar[int]
    DIRECTION: ClassVar[str]
    VALID_VERSIONS: ClassVar[tuple[int, int]]

    if TYPE_CHECKING:
        # The fields are set per struct from Kafka's schema at import, so the checker cannot name them: a field
        # read is ``Any``, and the code reading it says what it expects (an annotated local or return type).
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def __init__(self, **fields: Any) -> None:
        for name in self._fields:
            setattr(self, name, _fresh(self._defaults[name]))
        self._unknown_tags: dict[int, bytes] = {}
        for name, value in fields.items():
            if name not in self._defaults:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            setattr(self, name, self._coerce(name, value))

    @classmethod
    def _coerce(cls, name: str, value: Any) -> Any:
        """Turn dicts (and lists of dicts) into the child Message type, for convenient building."""
        child = cls._children.get(name)
        if child is None:
            return value
        if isinstance(value, dict):
            return child(**value)
        if isinstance(value, (list, tuple)):
            return [child(**v) if isinstance(v, dict) else v for v in value]
        return value

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._unknown_tags == other._unknown_tags and all(
            getattr(self, n) == getattr(other, n) for n in self._fields
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{n}={getattr(self, n)!r}" for n in self._fields]
        if self._unknown_tags:
            parts.append(f"_unknown_tags={self._unknown_tags!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (nested Messages become dicts); records stay memoryviews."""
        return {n: _plain(getattr(self, n)) for n in self._fields}


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class _StructDefault:
    """Default of a struct-typed field: a fresh default instance of ``cls``."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[Message]) -> None:
        self.cls = cls


def _fresh(default: Any) -> Any:
    if default == ():
        return []
    if isinstance(default, _StructDefault):
        return default.cls()
    return default


def is_default(value: Any, default: Any) -> bool:
    """True if ``value`` equals a field's default (used for tagged and absent fields)."""
    if default == ():
        return value is not None and len(value) == 0
    if isinstance(default, _StructDefault):
        return bool(value == default.cls())
    return bool(value == default)


# --------------------------------------------------------------------------------------------
# Message classes: one per struct of each (api_key, direction) schema segment.


def _build_class(name: str, fields: tuple[Any, ...], registry: dict[Any, Any]) -> type[Message]:
    defaults: dict[str, Any] = {}
    children: dict[str, type[Message]] = {}
    for f in fields:
        fname, kind, _v, _n, _t, _tv, default, _ign, sub, sname = f
        if sub is not None:
            child = _build_class(sname, sub, registry)
            children[fname] = child
            registry[id(sub)] = child
            if kind == "struct":
                default = None if _n is not None else _StructDefault(child)
        elif kind == "uuid":
            default = P.ZERO_UUID
        defaults[fname] = default
    names = tuple(defaults)
    return type(
        name,
        (Message,),
        {
            "__slots__": names,
            "_fields": names,
            "_defaults": defaults,
            "_children": children,
        },
    )


class _Segment:
    """One schema segment: a version range with its top-level Message class and field tree."""

    def __init__(self, spec: Any) -> None:
        self.name: str = spec["name"]
        self.valid: tuple[int, int] = spec["valid"]
        self.flexible: int | None = spec["flexible"]
        self.fields: tuple[Any, ...] = spec["fields"]
        self.classes: dict[int, type[Message]] = {}
        self.cls = _build_class(self.name, self.fields, self.classes)
        self.classes[id(self.fields)] = self.cls


_SEGMENTS: dict[tuple[int, str], tuple[_Segment, ...]] = {
    key: tuple(_Segment(s) for s in segs) for key, segs in SCHEMAS.items()
}


def segment(api_key: int, direction: str, version: int) -> _Segment | None:
    """The schema segment describing ``version``, or None if we do not decode it."""
    for seg in _SEGMENTS.get((api_key, direction), ()):
        if seg.valid[0] <= version <= seg.valid[1]:
            return seg
    return None


def decoded_ranges(direction: str = "request") -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) version over all segments."""
    out: dict[int, tuple[int, int]] = {}
    for (key, d), segs in _SEGMENTS.items():
        if d == direction:
            out[key] = (min(s.valid[0] for s in segs), max(s.valid[1] for s in segs))
    return out
