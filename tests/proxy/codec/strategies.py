"""Hypothesis strategies: our Messages generated from our schema table, and kio helpers."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib.util
import types
import typing
import uuid

import pytest
from hypothesis import strategies as st

from proxy.codec import messages as M
from proxy.codec import schema
from proxy.codec.primitives import ZERO_UUID

_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}

#: every (api_key, direction, version) we decode.
ALL_VERSIONS = [
    (k, d, v)
    for k, (lo, hi) in sorted(M.DECODED_APIS.items())
    for v in range(lo, hi + 1)
    for d in ("request", "response")
]

# kio is a test dependency (`make test` installs it); a reader running one module without it gets a skip, not an error
needs_kio = pytest.mark.skipif(importlib.util.find_spec("kio") is None, reason="kio (the test extra) is not installed")


def codec_of(direction: str):
    """(decode, encode) of ``direction``'s messages."""
    return (M.decode_request, M.encode_request) if direction == "request" else (M.decode_response, M.encode_response)


def _present(f: tuple, v: int, flex: bool) -> bool:
    vers, tag, tv = f[2], f[4], f[5]
    if not vers[0] <= v <= vers[1]:
        return False
    return tag is None or (flex and tv is not None and tv[0] <= v <= tv[1])


def _scalar(kind: str) -> st.SearchStrategy:
    if kind in _INT_RANGES:
        b = _INT_RANGES[kind]
        return st.integers(-(2 ** (b - 1)), 2 ** (b - 1) - 1)
    return {
        "uint16": st.integers(0, 0xFFFF),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6),
        "records": st.binary(max_size=12),
        "uuid": st.uuids(),
    }[kind]


def _kio_error_codes() -> st.SearchStrategy:
    from kio.schema.errors import ErrorCode

    return st.sampled_from(sorted(int(e) for e in ErrorCode))


@functools.cache  # one strategy per message version: Hypothesis caches its work on the strategy object
def message_st(
    api_key: int, direction: str, version: int, unknown_tags: bool = False, kio_safe: bool = False
) -> st.SearchStrategy:
    """Messages with every field of ``version`` drawn at random (absent fields keep defaults).

    ``kio_safe`` keeps values inside kio's stricter domain: error codes it knows,
    LogAppendTimeMs >= -1 (kio maps it to a datetime), and other int64 ``*_ms`` fields within
    what a timedelta holds.
    """
    seg = schema.segment(api_key, direction, version)
    flex = seg.flexible is not None and version >= seg.flexible
    tags = (
        st.dictionaries(st.integers(40, 300), st.binary(max_size=4), max_size=2)
        if unknown_tags and flex
        else st.just({})
    )

    def struct_st(fields: tuple) -> st.SearchStrategy:
        cls = seg.classes[id(fields)]
        parts = {f[0]: value_st(f) for f in fields if _present(f, version, flex)}

        def build(args: tuple) -> schema.Message:
            d, unk = args
            msg = cls(**d)
            msg._unknown_tags = unk
            return msg

        return st.tuples(st.fixed_dictionaries(parts), tags).map(build)

    def value_st(f: tuple) -> st.SearchStrategy:
        kind, nullable = f[1], f[3] is not None and f[3][0] <= version <= f[3][1]
        if kio_safe and f[0] in ("error_code", "partition_error_code"):
            s = _kio_error_codes()
        elif kio_safe and f[0] == "log_append_time_ms":
            s = st.integers(-1, 2**41)
        elif kio_safe and f[0].endswith("_ms") and kind == "int64":
            s = st.integers(-(2**41), 2**41)  # kio maps *_ms to timedelta, which overflows past ~2**52 ms
        elif kind == "struct":
            s = struct_st(f[8])
        elif kind == "[]struct":
            s = st.lists(struct_st(f[8]), max_size=2)
        elif kind.startswith("[]"):
            s = st.lists(_scalar(kind[2:]), max_size=3)
        else:
            s = _scalar(kind)
        return st.none() | s if nullable else s

    return struct_st(seg.fields)


# ---- kio ------------------------------------------------------------------------------------


def register_kio_strategies() -> None:
    from kio.static.primitive import Records

    st.register_type_strategy(Records, st.binary(max_size=12).map(Records))


@functools.cache
def kio_entity_st(cls: type) -> st.SearchStrategy:
    """kio's entities of ``cls``, every field drawn by its type as ``st.from_type`` would, but with arrays of one to
    three structs (so every example reaches the deepest nested struct) and up to three values: ``st.from_type``'s
    nested arrays made the examples of Fetch, Metadata or Produce hundreds of values each, or empty at the top."""
    hints = _type_hints(cls)
    return st.builds(cls, **{f.name: _kio_field_st(hints[f.name]) for f in dataclasses.fields(cls) if f.init})


def _kio_field_st(hint) -> st.SearchStrategy:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = args[0]
        if dataclasses.is_dataclass(item):
            return st.lists(kio_entity_st(item), min_size=1, max_size=3).map(tuple)
        return st.lists(_kio_field_st(item), max_size=3).map(tuple)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return st.one_of(*(_kio_field_st(a) for a in args))
    if dataclasses.is_dataclass(hint):
        return kio_entity_st(hint)
    return st.from_type(hint)


def kio_has(api_key: int, direction: str, version: int) -> bool:
    """Whether kio has this API version, from its index: without importing the module (at collection, by every
    pytest-xdist worker, importing all of them took 0.9 CPU-seconds)."""
    from kio.schema.index import api_key_map, schema_name_map
    from kio.static.constants import EntityType

    et = EntityType.request if direction == "request" else EntityType.response
    name = api_key_map.get(api_key)
    return name is not None and et in schema_name_map.get(name, {}).get(version, {})


def kio_class(api_key: int, direction: str, version: int):
    """kio's entity class for this API version, or None where kio lacks it."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType

    et = EntityType.request if direction == "request" else EntityType.response
    try:
        mod = load_payload_module(api_key, version, et)
    except Exception:  # noqa: BLE001 - kio lacks the version
        return None
    return next(c for c in vars(mod).values() if isinstance(c, type) and getattr(c, "__type__", None) == et)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


# Fields Kafka renamed after kio's schemas were generated, the wire unchanged: kio's name -> Kafka's, by kio module.
# StreamsGroupHeartbeatResponse v0's int32 AcceptableRecoveryLag became AcceptableRecoveryLagLegacy when v1 added an
# int64 AcceptableRecoveryLag (Kafka 4.4).
_RENAMED_SINCE_KIO = {
    "kio.schema.streams_group_heartbeat.v0.response": {"acceptable_recovery_lag": "acceptable_recovery_lag_legacy"},
}


def kio_plain(entity) -> dict:
    """A kio entity as a dict in our naming: kio's timedelta/datetime fields become ``*_ms`` ints."""
    out = {}
    hints = _type_hints(type(entity))
    renamed = _RENAMED_SINCE_KIO.get(type(entity).__module__, {})
    for f in dataclasses.fields(entity):
        value, name, kt = getattr(entity, f.name), renamed.get(f.name, f.name), f.metadata.get("kafka_type")
        if kt in ("timedelta_i32", "timedelta_i64"):
            name, value = name + "_ms", value // _MS
        elif kt == "datetime_i64":
            name, value = name + "_ms", -1 if value is None else (value - _EPOCH) // _MS
        elif kt == "uuid" and value is None:
            value = ZERO_UUID
        out[name] = _kio_value(value, hints.get(f.name))
    return out


@functools.cache
def _type_hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


def _kio_value(value, hint):
    if dataclasses.is_dataclass(value):
        return kio_plain(value)
    if isinstance(value, tuple):
        return [_kio_value(v, None) for v in value]
    if isinstance(value, (bytes, memoryview)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool) and type(value) is not int:
        return int(value)
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    return value


def ours_plain(msg: schema.Message, keep: dict) -> dict:
    """Our message as a dict restricted to (recursively) the keys of ``keep``."""
    out = {}
    for name, want in keep.items():
        value = getattr(msg, name)
        if isinstance(value, schema.Message):
            value = ours_plain(value, want)
        elif isinstance(value, list) and len(value) == len(want):
            value = [ours_plain(v, w) if isinstance(v, schema.Message) else v for v, w in zip(value, want)]
        elif isinstance(value, memoryview):
            value = bytes(value)
        elif isinstance(value, uuid.UUID) or value is None:
            pass
        out[name] = value
    return out
