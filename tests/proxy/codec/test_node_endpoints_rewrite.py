"""The NodeEndpoints field rewritten alone (proxy.codec.node_endpoints) against the whole response decoded, rewritten
and encoded again (what the proxy did before, and still does for a field not laid out the plain way): for any
Produce v10+ or Fetch v16+ answer, the same bytes, the same brokers told to the advertiser in the same order, and
for a field damaged anywhere, either the decoder's answer or a hand-over to it, never an answer of its own."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec.apis import FETCH, FETCH_NODE_ENDPOINTS_SINCE, PRODUCE, PRODUCE_NODE_ENDPOINTS_SINCE
from proxy.codec.errors import ProtocolError
from proxy.codec.messages import DECODED_APIS, decode_response, encode_response, new_response
from proxy.codec.node_endpoints import UNUSUAL, rewrite_tagged_endpoints
from proxy.codec.skim import tag_of, tagged_fields
from tests.proxy.byte_rate_scopes import batch

VERSIONS = [(PRODUCE, v) for v in range(PRODUCE_NODE_ENDPOINTS_SINCE, DECODED_APIS[PRODUCE][1] + 1)] + [
    (FETCH, v) for v in range(FETCH_NODE_ENDPOINTS_SINCE, DECODED_APIS[FETCH][1] + 1)
]
TOPIC = uuid.UUID("6f1c1c5e-0000-4000-8000-000000000002")
RECORDS = batch(3)


class Advertiser:
    """Every broker it is told of, in order; each moved to a port of its own unless ``keep`` names it."""

    def __init__(self, keep: frozenset[int] = frozenset()) -> None:
        self.told: list[tuple[int, str, int]] = []
        self.keep = keep

    def advertise(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        self.told.append((node_id, host, port))
        return (host, port) if node_id in self.keep else ("proxy.example", 19000 + node_id % 1000)


def answer(api_key: int, version: int, endpoints: list[dict]) -> bytes:
    if api_key == PRODUCE:
        part = {"index": 0, "error_code": 6, "current_leader": {"leader_id": 2, "leader_epoch": 7}}
        topics = {"responses": [{"name": "t", "partition_responses": [part]}]}
    else:
        part = {"partition_index": 0, "error_code": 6, "records": RECORDS}
        topics = {"responses": [{"topic_id": TOPIC, "partitions": [part]}]}
    return encode_response(api_key, version, new_response(api_key, version, node_endpoints=endpoints, **topics))


def decoded_whole(api_key: int, version: int, body: bytes, advertiser: Advertiser) -> bytes | None:
    """The reference: the proxy's rewrite before, on the decoded message (None: nothing to rewrite)."""
    msg = decode_response(api_key, version, body)
    if not msg.node_endpoints:
        return None
    for node in msg.node_endpoints:
        if node.node_id >= 0:
            node.host, node.port = advertiser.advertise(node.node_id, node.host, node.port)
    return encode_response(api_key, version, msg)


def in_place(api_key: int, version: int, body: bytes, advertiser: Advertiser) -> bytes | None:
    where = tagged_fields(api_key, "response", version, memoryview(body)).get(
        tag_of(api_key, "response", version, "node_endpoints")
    )
    assert where is not None
    return rewrite_tagged_endpoints(memoryview(body), where[0], where[1], advertiser.advertise)


hosts = st.text(min_size=0, max_size=40)  # unicode, empty
endpoint = st.fixed_dictionaries(
    {
        "node_id": st.integers(-1, 2**31 - 1),
        "host": hosts,
        "port": st.integers(-(2**31), 2**31 - 1),
        "rack": st.none() | hosts,
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.lists(endpoint, min_size=1, max_size=6), st.data())
def test_the_field_alone_gives_the_bytes_the_whole_decode_gives(api_version, endpoints, data):
    api_key, version = api_version
    keep = frozenset(data.draw(st.lists(st.sampled_from([e["node_id"] for e in endpoints]))))
    body = answer(api_key, version, endpoints)
    fast, slow = Advertiser(keep), Advertiser(keep)
    got = in_place(api_key, version, body, fast)
    expected = decoded_whole(api_key, version, body, slow)
    assert got is not UNUSUAL
    assert fast.told == slow.told
    if got is None:  # every address kept: the broker's bytes go back, as the whole decode would write them
        assert expected == body
    else:
        assert got == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.lists(endpoint, min_size=1, max_size=4), st.data())
def test_a_damaged_field_is_handed_to_the_decoder_or_read_as_it_reads_it(api_version, endpoints, data):
    """Bytes of the field changed anywhere (lengths, counts, the varints): the in-place rewrite answers UNUSUAL
    (the caller decodes the whole body) or exactly what the decoder would make of that body, having told the
    advertiser exactly what the decoder's path tells it."""
    api_key, version = api_version
    body = bytearray(answer(api_key, version, endpoints))
    where = tagged_fields(api_key, "response", version, memoryview(bytes(body))).get(
        tag_of(api_key, "response", version, "node_endpoints")
    )
    assert where is not None
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(where[0], where[1] - 1))
        body[at] = data.draw(st.integers(0, 255))
    damaged = bytes(body)
    fast, slow = Advertiser(), Advertiser()
    got = rewrite_tagged_endpoints(memoryview(damaged), where[0], where[1], fast.advertise)
    if got is UNUSUAL:
        assert fast.told == []  # nothing advertised from a field left to the decoder
        return
    try:
        expected = decoded_whole(api_key, version, damaged, slow)
    except (ProtocolError, ValueError, UnicodeDecodeError):
        pytest.fail(f"the decoder refuses what the in-place rewrite answered: {damaged[where[0] : where[1]].hex()}")
    assert fast.told == slow.told
    assert (got if got is not None else damaged) == (expected if expected is not None else damaged)


@pytest.mark.parametrize(("api_key", "version"), VERSIONS)
def test_a_size_not_in_its_shortest_form_is_left_to_the_decoder(api_key, version):
    """A tagged field's size written in more bytes than it needs (a valid varint, not what Kafka writes): the
    in-place rewrite cannot tell where it starts from the data's start, so it hands the body over."""
    body = answer(api_key, version, [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}])
    tag = tag_of(api_key, "response", version, "node_endpoints")
    start, end = tagged_fields(api_key, "response", version, memoryview(body))[tag]
    size = end - start
    assert size < 128 and body[start - 1] == size
    padded = body[: start - 1] + bytes([0x80 | size, 0x00]) + body[start:]
    start += 1
    end += 1
    assert tagged_fields(api_key, "response", version, memoryview(padded))[tag] == (start, end)
    assert rewrite_tagged_endpoints(memoryview(padded), start, end, Advertiser().advertise) is UNUSUAL
    assert decoded_whole(api_key, version, padded, Advertiser()) is not None  # the decoder reads it


@pytest.mark.parametrize("api_version", [(FETCH, FETCH_NODE_ENDPOINTS_SINCE), (PRODUCE, PRODUCE_NODE_ENDPOINTS_SINCE)])
def test_a_length_not_in_its_shortest_form_goes_to_the_decoder(api_version):
    """Host "0", port -127 (ff ff ff 81), no rack (00): the host's length damaged from 02 to 01 makes an empty host,
    a port of 30 ff ff ff, and a rack whose length is 81 00, 1 in two bytes. Kept as it is, the rack would be one
    byte longer than the decoder writes it (found by the test above)."""
    api_key, version = api_version
    body = answer(api_key, version, [{"node_id": 0, "host": "0", "port": -127, "rack": None}])
    start, end = tagged_fields(api_key, "response", version, memoryview(body))[
        tag_of(api_key, "response", version, "node_endpoints")
    ]
    assert body[start:end].hex() == "02" + "00000000" + "0230" + "ffffff81" + "00" + "00"
    damaged = body[: start + 5] + b"\x01" + body[start + 6 :]
    assert rewrite_tagged_endpoints(memoryview(damaged), start, end, Advertiser().advertise) is UNUSUAL
    assert decoded_whole(api_key, version, damaged, Advertiser()) is not None  # which the decoder answers
