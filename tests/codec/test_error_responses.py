"""Error responses built by the codec, for every decoded API and every version, from random requests.

Each one must encode and decode in the request's own version, fail every item the request named (topics,
partitions, coordinator keys, quota entries) or the request as a whole, let ``item_errors`` override single items,
carry ``throttle_time_ms`` where the version has it, and frame with the request's correlation id.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import messages as M
from proxy.codec.apis import client_throttles, has_throttle_time, strict_mutation_quota
from proxy.codec.error_codes import (THROTTLING_QUOTA_EXCEEDED, TOPIC_AUTHORIZATION_FAILED, error_name,
                                     is_retriable)
from proxy.codec.header import response_header_length
from proxy.codec.responses import encode_local_response, error_response
from tests.codec.strategies import message_st

VERSIONS = [(key, v) for key, (lo, hi) in sorted(M.DECODED_APIS.items()) for v in range(lo, hi + 1)]
_SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))


def item_codes(api_key: int, msg) -> list[tuple[object, int]]:
    """(item key, error code) for every item of a response that has items; [] for top-level-only responses."""
    if api_key == 0:
        return [((t.name, p.index), p.error_code) for t in msg.responses for p in t.partition_responses]
    if api_key == 1:
        return [((t.topic, p.partition_index), p.error_code) for t in msg.responses for p in t.partitions]
    if api_key == 3:
        return [(t.name, t.error_code) for t in msg.topics]
    if api_key == 10 and msg.coordinators:
        return [(c.key, c.error_code) for c in msg.coordinators]
    if api_key == 19:
        return [(t.name, t.error_code) for t in msg.topics]
    if api_key == 20:
        return [(t.name, t.error_code) for t in msg.responses]
    if api_key == 37:
        return [(t.name, t.error_code) for t in msg.results]
    if api_key == 49:
        return [(None, e.error_code) for e in msg.entries]
    return []


@pytest.mark.parametrize("api_key,version", VERSIONS)
@_SETTINGS
@given(data=st.data())
def test_every_item_fails_with_the_code(api_key, version, data):
    request = data.draw(message_st(api_key, "request", version))
    msg = error_response(api_key, version, request, THROTTLING_QUOTA_EXCEEDED, throttle_time_ms=1234)
    wire = encode_local_response(api_key, version, 77, msg)
    assert struct.unpack_from(">ii", wire) == (len(wire) - 4, 77)
    back = M.decode_response(api_key, version, wire[response_header_length(api_key, version, wire):])
    items = item_codes(api_key, back)
    if items:
        assert {code for _, code in items} == {THROTTLING_QUOTA_EXCEEDED}
    elif api_key not in (3, 1, 0, 19, 20, 37, 49) and not (api_key == 10 and version >= 4):
        assert back.error_code == THROTTLING_QUOTA_EXCEEDED
    if has_throttle_time(api_key, version):
        assert back.throttle_time_ms == 1234


def test_item_errors_override_single_topics():
    request = M.new_request(19, 7, topics=[{"name": "a", "num_partitions": 1, "replication_factor": 1},
                                           {"name": "b", "num_partitions": 1, "replication_factor": 1}])
    msg = error_response(19, 7, request, 0, item_errors={"b": THROTTLING_QUOTA_EXCEEDED},
                         error_message="quota")
    assert [(t.name, t.error_code) for t in msg.topics] == [("a", 0), ("b", THROTTLING_QUOTA_EXCEEDED)]
    request = M.new_request(0, 9, acks=1, topic_data=[{"name": "t", "partition_data": [{"index": 0}, {"index": 1}]}])
    msg = error_response(0, 9, request, 0, item_errors={("t", 1): TOPIC_AUTHORIZATION_FAILED})
    assert [p.error_code for p in msg.responses[0].partition_responses] == [0, TOPIC_AUTHORIZATION_FAILED]


def test_error_table_and_api_facts():
    assert error_name(89) == "THROTTLING_QUOTA_EXCEEDED" and error_name(35) == "UNSUPPORTED_VERSION"
    assert error_name(9999) == "UNKNOWN_9999"
    assert is_retriable(89) and is_retriable(6) and not is_retriable(29)
    assert not has_throttle_time(0, 0) and has_throttle_time(0, 1) and has_throttle_time(22, 0)
    assert not has_throttle_time(3, 2) and has_throttle_time(3, 3)
    assert not client_throttles(0, 5) and client_throttles(0, 6) and client_throttles(1, 8)
    assert not client_throttles(17, 1)  # SaslHandshake has no throttle at all
    assert strict_mutation_quota(19, 6) and not strict_mutation_quota(19, 5)
    assert strict_mutation_quota(37, 3) and strict_mutation_quota(20, 5) and not strict_mutation_quota(0, 9)
