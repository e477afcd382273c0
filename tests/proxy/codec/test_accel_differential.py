"""The C extension (proxy/codec/native/) against the pure Python it mirrors: the same frames, well formed, cut
anywhere, mutated, with wrong lengths, negative sizes, non-UTF-8 client ids and huge counts, through both; the same
value or the same error (class and message) from each.

The rest of the codec's tests run through the bound names (the C where it is built, tests/proxy/codec/test_header.py
and the others), this module compares the two; the killed-worker test of tests/integration/test_workers.py runs a
whole proxy on the pure path."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import apis, header, produce_prefix, skim
from proxy.codec.accel import NATIVE
from proxy.codec.errors import ProtocolError
from proxy.codec.messages import encode_request, new_request
from tests.proxy.codec.builders import record_batch, uvarint
from tests.proxy.codec.strategies import codec_of, message_st

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built here (or is switched off)")

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def outcome(function, *args):
    """What ``function(*args)`` gives: its value (with the type of each field, so "" and b"" or 1 and True differ) or
    the class and message of what it raised."""
    try:
        value = function(*args)
    except Exception as exc:  # every error counts: the same class and message from both
        return "raised", type(exc), str(exc)
    if isinstance(value, tuple):
        return "value", value, [type(field) for field in value]
    slots = getattr(type(value), "__slots__", ())
    return "value", type(value), value, [type(getattr(value, name)) for name in slots]


def same(pure, native, *args):
    assert outcome(native, *args) == outcome(pure, *args)


def mutations(data, frame: bytes) -> list:
    """``frame`` as a peer might send it: whole, cut anywhere, a byte changed, bytes inserted, in every kind of
    buffer the codec reads from."""
    cut = data.draw(st.integers(0, len(frame)))
    flipped = bytearray(frame)
    if flipped:
        flipped[data.draw(st.integers(0, len(frame) - 1))] ^= data.draw(st.integers(1, 255))
    at = data.draw(st.integers(0, len(frame)))
    inserted = frame[:at] + data.draw(st.binary(min_size=1, max_size=6)) + frame[at:]
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    return [kind(f) for f in (frame, frame[:cut], bytes(flipped), inserted, frame + b"\x00\x01rest")]


def _produce_frame(data, version: int) -> bytes:
    topics = data.draw(st.integers(0, 2))
    batches = [record_batch(producer_id=data.draw(st.sampled_from([-1, 5, 2**40])), n=1) for _ in range(2)]
    records = data.draw(st.sampled_from([None, b"", batches[0], batches[0] + batches[1], b"\x00" * 20]))
    partitions = [{"index": i, "records": records} for i in range(data.draw(st.integers(0, 2)))]
    name = data.draw(st.sampled_from(["orders", "", "é" * 3]))
    topic_data = [{"name": name, "topic_id": uuid.uuid4(), "partition_data": partitions} for _ in range(topics)]
    transactional_id = data.draw(st.sampled_from([None, "", "tx-1"])) if version >= 3 else None
    msg = new_request(
        apis.PRODUCE,
        version,
        transactional_id=transactional_id,
        acks=data.draw(st.sampled_from([-1, 0, 1])),
        timeout_ms=30000,
        topic_data=topic_data,
    )
    body = encode_request(apis.PRODUCE, version, msg)
    return _frame(data, apis.PRODUCE, version, body)


def _frame(data, api_key: int, version: int, body: bytes) -> bytes:
    """A request frame of ``body``: the header as a client writes it, or with its client id and tagged fields drawn
    to be wrong."""
    client_id = data.draw(st.one_of(st.none(), st.text(max_size=12).map(str.encode), st.binary(max_size=12)))
    length = -1 if client_id is None else len(client_id)
    length = data.draw(st.one_of(st.just(length), st.integers(-3, 40)))
    head = struct.pack(">hhih", api_key, version, data.draw(st.integers(-(2**31), 2**31 - 1)), length)
    head += client_id or b""
    if apis.request_header_version(api_key, max(version, 0)) >= 2:
        head += data.draw(st.one_of(st.just(b"\x00"), _tag_section(data), st.binary(max_size=8)))
    payload = head + body
    size = data.draw(
        st.one_of(st.just(len(payload)), st.integers(-5, len(payload) + 8), st.integers(-(2**31), 2**31 - 1))
    )
    return struct.pack(">i", size) + payload


def _tag_section(data) -> st.SearchStrategy[bytes]:
    count = data.draw(st.one_of(st.integers(0, 3), st.integers(60, 70), st.just(2**34)))
    fields = b"".join(
        uvarint(data.draw(st.integers(0, 2**20))) + uvarint(n) + b"x" * n
        for n in data.draw(st.lists(st.integers(0, 200), max_size=min(count, 70)))
    )
    return st.just(uvarint(count) + fields)


_API_KEYS = st.one_of(
    st.sampled_from([apis.PRODUCE, apis.FETCH, apis.METADATA, apis.API_VERSIONS, apis.CONTROLLED_SHUTDOWN]),
    st.integers(-(2**15), 2**15 - 1),
)
_LIMITS = st.tuples(
    st.sampled_from([2**31 - 1, 100, 30, 5]),
    st.sampled_from(["socket.request.max.bytes", "sasl.x"]),
    st.sampled_from([65536, 40, 12, 0]),
)


@_SETTINGS
@given(data=st.data())
def test_request_headers_and_prefixes(data):
    api_key = data.draw(_API_KEYS)
    version = data.draw(st.integers(-2, 20))
    if api_key == apis.PRODUCE and 0 <= version <= 13 and data.draw(st.booleans()):
        frame = _produce_frame(data, version)
    else:
        frame = _frame(data, api_key, version, data.draw(st.binary(max_size=30)))
    max_size, limit_name, max_header = data.draw(_LIMITS)
    for buf in mutations(data, frame):
        same(header.request_header_fields, NATIVE.request_header_fields, buf, max_size, limit_name, max_header)
        same(header.request_header_fields, NATIVE.request_header_fields, buf, max_size)
        for read_prefix in (False, True):
            args = (buf, max_size, read_prefix, limit_name, max_header)
            same(produce_prefix.pure_parse_request_prefix, NATIVE.parse_request_prefix, *args)
        same(produce_prefix.pure_parse_request_prefix, NATIVE.parse_request_prefix, buf, max_size)


@_SETTINGS
@given(data=st.data())
def test_produce_prefixes(data):
    version = data.draw(st.integers(0, 13))
    for buf in mutations(data, _produce_frame(data, version)):
        same(produce_prefix.pure_parse_request_prefix, NATIVE.parse_request_prefix, buf, 2**31 - 1, True)


@_SETTINGS
@given(data=st.data())
def test_response_prefixes_and_header_lengths(data):
    api_key = data.draw(_API_KEYS)
    version = data.draw(st.integers(-1, 20))
    tags = data.draw(st.one_of(st.just(b"\x00"), _tag_section(data), st.binary(max_size=8)))
    payload = struct.pack(">i", data.draw(st.integers(-(2**31), 2**31 - 1))) + tags + data.draw(st.binary(max_size=8))
    size = data.draw(st.one_of(st.just(len(payload)), st.integers(-5, 12), st.integers(-(2**31), 2**31 - 1)))
    max_size = data.draw(st.sampled_from([2**31 - 1, 8, 3]))
    for buf in mutations(data, struct.pack(">i", size) + payload):
        same(header.pure_parse_response_prefix, NATIVE.parse_response_prefix, buf, max_size)
        same(header.pure_parse_response_prefix, NATIVE.parse_response_prefix, buf)
        same(header.pure_response_header_length, NATIVE.response_header_length, api_key, version, buf)


_SKIMMED = [
    (apis.PRODUCE, "response", 9),
    (apis.PRODUCE, "response", 11),
    (apis.FETCH, "response", 16),
    (apis.FETCH, "request", 4),
    (apis.FETCH, "request", 17),
    (apis.METADATA, "response", 12),
    (apis.SHARE_FETCH, "response", 1),
]


@pytest.mark.parametrize("api_key,direction,version", _SKIMMED)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_skims(api_key, direction, version, data):
    encode = codec_of(direction)[1]
    body = encode(api_key, version, data.draw(message_st(api_key, direction, version, unknown_tags=True)))
    for buf in [*mutations(data, body), data.draw(st.binary(max_size=40))]:
        same(skim.pure_tagged_fields, NATIVE.tagged_fields, api_key, direction, version, buf)
        if api_key == apis.SHARE_FETCH:
            same(skim.pure_array_count, NATIVE.array_count, api_key, direction, version, "node_endpoints", buf)


def test_skims_of_no_schema_or_no_array():
    same(skim.pure_tagged_fields, NATIVE.tagged_fields, 9999, "request", 0, b"")
    same(skim.pure_array_count, NATIVE.array_count, apis.SHARE_FETCH, "response", 1, "throttle_time_ms", b"")
    with pytest.raises(ProtocolError, match="no schema for request 9999 v0"):
        NATIVE.tagged_fields(9999, "request", 0, b"")


@pytest.fixture
def deep_steps(monkeypatch):
    """Arrays nested past the levels the Python skipper inlines (no schema of today nests that deep), for any key."""
    depth = skim._INLINED + 3
    steps: tuple = ((skim._RUN, 2, 0),)
    for _ in range(depth):
        steps = ((skim._ARRAY, steps, 0), (skim._NULLABLE_STRUCT, ((skim._VARIABLE, 2, 0),), 0))
    monkeypatch.setattr(skim, "_top_steps", lambda *_key: (steps, False))
    skim._plan.cache_clear()
    NATIVE.configure_skim(skim._program(skim._top_steps), skim._program(skim._prefix_steps))
    yield depth
    monkeypatch.undo()
    skim._plan.cache_clear()
    NATIVE.configure_skim(skim._program(skim._top_steps), skim._program(skim._prefix_steps))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_arrays_nested_past_the_inlined_levels(deep_steps, data):
    body = b"xy"
    for _ in range(deep_steps):
        body = b"\x00\x00\x00\x02" + body * 2 + data.draw(st.sampled_from([b"\xff", b"\x00\x00\x00", b"\x01\x00\x00"]))
    for buf in mutations(data, body):
        same(skim.pure_tagged_fields, NATIVE.tagged_fields, 1, "request", 0, buf)
