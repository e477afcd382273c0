"""Record batch walk, the API table, ApiVersions v0 fallback, and legacy versions.

Legacy versions (Produce 0-2, Fetch 0-3, CreateTopics 0-1, DeleteTopics 0; removed in Kafka 4.0,
absent from kio) are checked against kafka-python's hand-written ``kafka.protocol.old`` structs.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import apis
from proxy.codec import messages as M
from proxy.codec.errors import ProtocolError
from proxy.codec.records import fetch_records_summary, iter_batches, produce_records_summary
from tests.proxy.codec.builders import record_batch
from tests.proxy.codec.strategies import message_st


def test_batches_report_producer_and_flags():
    one, two = record_batch(7, 2, True, 3), record_batch(9, 0, False, 5)
    s = produce_records_summary(one + two)
    assert (s.size_bytes, s.batch_count, s.record_count) == (len(one) + len(two), 2, 8)
    assert s.producers == ((7, 2, True), (9, 0, False))
    first = next(iter_batches(one))
    assert first.magic == 2 and first.is_transactional and not first.is_control
    assert first.size_bytes == len(one)


def test_truncated_final_batch_is_legal_in_fetch_only():
    one = record_batch()
    for cut in (5, 20, len(one) - 1):
        s = fetch_records_summary(one + one[:cut])
        assert (s.batch_count, s.truncated_bytes) == (1, cut)
        with pytest.raises(ProtocolError):
            produce_records_summary(one + one[:cut])


def test_records_walk_inside_a_decoded_produce_request():
    rec = record_batch()
    msg = M.new_request(
        0, 9, acks=-1, timeout_ms=1000, topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": rec}]}]
    )
    body = M.encode_request(0, 9, msg)
    back = M.decode_request(0, 9, body)
    records = back.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is not None
    assert produce_records_summary(records).record_count == 3


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_records_walk_raises_only_protocol_error(garbage):
    for walk in (produce_records_summary, fetch_records_summary):
        try:
            walk(garbage)
        except ProtocolError:
            pass


def test_api_table():
    assert apis.api_name(0) == "Produce" and apis.api_name(18) == "ApiVersions"
    assert apis.api_name(1234) == "Unknown1234"
    assert apis.VALID_VERSIONS[0] == (0, 13) and apis.KAFKA4_VALID_VERSIONS[0] == (3, 13)
    assert apis.FLEXIBLE_SINCE[17] is None and apis.FLEXIBLE_SINCE[1] == 12
    assert apis.request_header_version(7, 0) == 0 and apis.request_header_version(7, 3) == 2
    assert apis.request_header_version(0, 8) == 1 and apis.request_header_version(0, 9) == 2
    assert apis.response_header_version(18, 4) == 0 and apis.response_header_version(3, 9) == 1
    assert set(range(0, 93)) <= set(apis.API_NAMES)


def test_api_versions_error_falls_back_to_v0():
    body = M.api_versions_unsupported_body(0, 4)
    msg = M.decode_api_versions_response(4, body)
    assert msg.error_code == M.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in msg.api_keys] == [(18, 0, 4)]
    ok = M.new_response(18, 3, api_keys=[{"api_key": 0, "min_version": 3, "max_version": 13}])
    assert M.decode_api_versions_response(3, M.encode_response(18, 3, ok)) == ok


def test_encoding_a_field_the_version_lacks_is_refused():
    msg = M.new_request(0, 3, acks=1, topic_data=[{"name": "t", "partition_data": []}])
    msg.transactional_id = "tx"
    with pytest.raises(ValueError):
        M.encode_request(0, 2, msg)


LEGACY = (
    [(0, "request", v) for v in (0, 1, 2)]
    + [(0, "response", v) for v in (0, 1, 2)]
    + [(1, d, v) for d in ("request", "response") for v in (0, 1, 2, 3)]
    + [(19, d, v) for d in ("request", "response") for v in (0, 1)]
    + [(20, d, 0) for d in ("request", "response")]
)


def _old_class(api_key, direction, version):
    from kafka.protocol.old import admin, fetch, produce

    mod = {0: produce, 1: fetch, 19: admin, 20: admin}[api_key]
    name = {0: "Produce", 1: "Fetch", 19: "CreateTopics", 20: "DeleteTopics"}[api_key]
    return getattr(mod, f"{name}{direction.capitalize()}_v{version}")


@pytest.mark.parametrize("api_key,direction,version", LEGACY)
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_legacy_versions_against_kafka_python(api_key, direction, version, data):
    """Removed-in-4.0 versions: we encode, kafka-python decodes to the same values, and back."""
    decode, encode = (
        (M.decode_request, M.encode_request) if direction == "request" else (M.decode_response, M.encode_response)
    )
    msg = data.draw(message_st(api_key, direction, version))
    body = encode(api_key, version, msg)
    old = _old_class(api_key, direction, version)
    parsed = old.decode(body)
    assert old.encode(parsed) == body  # kafka-python re-encodes the same bytes
    assert decode(api_key, version, old.encode(parsed)) == msg
