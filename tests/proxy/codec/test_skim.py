"""Skimming a body (proxy.codec.skim) against decoding it: the same top-level tagged fields, the same fields read, the
same bodies refused; and the Fetch request facts read from a skim (proxy.codec.fetch_prefix) as the decoder reads
them."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import messages as M
from proxy.codec import schema
from proxy.codec.apis import FETCH, PRODUCE, SHARE_FETCH
from proxy.codec.errors import ProtocolError
from proxy.codec.fetch_prefix import fetch_body_facts, with_max_bytes
from proxy.codec.skim import array_count, fixed_offset, tag_of, tagged_fields
from tests.proxy.codec.builders import record_batch
from tests.proxy.codec.strategies import codec_of, message_st

_SETTINGS = settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
# The bodies the request path skims (node endpoints of Produce v10+ and Fetch v16+ responses; a Fetch request's
# replica state from v15 and its MaxBytes from v3), and one version before each, not flexible or without the tag.
SKIMMED = [
    *((PRODUCE, "response", v) for v in (9, 10, 11, 13)),
    *((FETCH, "response", v) for v in (15, 16, 18)),
    *((FETCH, "request", v) for v in (3, 11, 14, 15, 18)),
]


def _tags_written(api_key, direction, version, msg) -> set[int]:
    """The top-level tags the encoder wrote for ``msg``: its unknown ones and its known ones not at their default."""
    seg = schema.segment(api_key, direction, version)
    tags = set(msg._unknown_tags)
    for field in seg.fields:
        name, versions, tag, tagged_versions = field[0], field[2], field[4], field[5]
        if tag is None or tagged_versions is None or not tagged_versions[0] <= version <= tagged_versions[1]:
            continue
        if versions[0] <= version <= versions[1] and not schema.is_default(getattr(msg, name), msg._defaults[name]):
            tags.add(tag)
    return tags


@pytest.mark.parametrize("api_key,direction,version", SKIMMED)
@_SETTINGS
@given(data=st.data())
def test_skim_finds_the_tags_the_encoder_wrote(api_key, direction, version, data):
    decode, encode = codec_of(direction)
    msg = data.draw(message_st(api_key, direction, version, unknown_tags=True))
    body = encode(api_key, version, msg)
    found = tagged_fields(api_key, direction, version, body)
    assert set(found) == _tags_written(api_key, direction, version, msg)
    for tag, (start, end) in found.items():
        if tag in msg._unknown_tags:
            assert body[start:end] == msg._unknown_tags[tag]
    # what is skimmed from a truncated or extended body is refused, as the decoder refuses it
    if body:
        cut = data.draw(st.integers(0, len(body) - 1))
        with pytest.raises(ProtocolError):
            tagged_fields(api_key, direction, version, body[:cut])
    with pytest.raises(ProtocolError):
        tagged_fields(api_key, direction, version, body + data.draw(st.binary(min_size=1, max_size=4)))
    # a body the decoder reads, the skim reads to the same tags; garbage raises ProtocolError and nothing else
    flipped = bytearray(body)
    if flipped:
        flipped[data.draw(st.integers(0, len(body) - 1))] ^= data.draw(st.integers(1, 255))
    for mutated in (bytes(flipped), data.draw(st.binary(max_size=64))):
        try:
            decoded = decode(api_key, version, mutated)
        except ProtocolError:
            decoded = None
        try:
            skimmed = tagged_fields(api_key, direction, version, mutated)
        except ProtocolError:
            assert decoded is None
            continue
        if decoded is not None:
            assert set(skimmed) == _tags_written(api_key, direction, version, decoded)


@pytest.mark.parametrize("version", (3, 12, 14, 15, 17, M.DECODED_APIS[FETCH][1]))
@_SETTINGS
@given(data=st.data())
def test_fetch_facts_are_the_decoders(version, data):
    body = M.encode_request(FETCH, version, data.draw(message_st(FETCH, "request", version, unknown_tags=True)))
    msg = M.decode_request(FETCH, version, body)
    follower = msg.replica_state.replica_id if version >= 15 else -1
    assert fetch_body_facts(version, body) == (follower, msg.max_bytes)
    capped = data.draw(st.integers(0, 2**31 - 1))
    msg.max_bytes = capped
    assert with_max_bytes(version, body, capped) == M.encode_request(FETCH, version, msg)


def test_tags_and_offsets_are_the_schemas():
    assert tag_of(PRODUCE, "response", 10, "node_endpoints") == 0
    assert tag_of(FETCH, "response", 16, "node_endpoints") == 0
    assert tag_of(FETCH, "request", 15, "replica_state") == 1
    assert fixed_offset(FETCH, "request", 14, "max_bytes") == 12  # after ReplicaId, MaxWaitMs, MinBytes
    assert fixed_offset(FETCH, "request", 15, "max_bytes") == 8  # ReplicaId moved into ReplicaState (KIP-903)
    with pytest.raises(ValueError):
        tag_of(PRODUCE, "response", 9, "node_endpoints")  # not before v10
    with pytest.raises(ValueError):
        fixed_offset(PRODUCE, "request", 9, "acks")  # after the transactional id, a string


@pytest.mark.parametrize("version", [0, 1, 2])
def test_array_count_finds_share_fetch_node_endpoints_past_its_records(version):
    nodes = [{"node_id": n, "host": f"b{n}", "port": 9092} for n in (1, 2, 3)]
    topic = {"topic_id": uuid.uuid4(), "partitions": [{"partition_index": 0, "records": record_batch(n=5)}]}
    for expected, fields in ((3, {"node_endpoints": nodes}), (0, {})):
        body = M.encode_response(
            SHARE_FETCH, version, M.new_response(SHARE_FETCH, version, responses=[topic], **fields)
        )
        assert array_count(SHARE_FETCH, "response", version, "node_endpoints", body) == expected
    with pytest.raises(ValueError):
        array_count(SHARE_FETCH, "response", version, "throttle_time_ms", body)  # not an array


def test_arrays_nested_deeper_than_inlined_are_skimmed_by_calls():
    # no schema of today nests that deep: the levels past the inlined ones are functions called per element
    from proxy.codec.skim import _ARRAY, _INLINED, _RUN, _Skippers

    depth = _INLINED + 3
    steps: tuple = ((_RUN, 2, 0),)
    for _ in range(depth):
        steps = ((_ARRAY, steps, 0),)
    skippers = _Skippers(flexible=False)
    skip = skippers.compile(steps)
    assert skippers.count > 1  # more than one function made
    body = b"xy"
    for _ in range(depth):
        body = b"\x00\x00\x00\x02" + body * 2  # two elements at every level
    assert skip(body, 0) == len(body)
    with pytest.raises(ProtocolError):
        skip(body[:-1], 0)
