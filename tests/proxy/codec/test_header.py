"""Request header v1/v2, response header v0/v1 and the ApiVersions exception, on bytes."""

import struct

import pytest

from proxy.codec.errors import ProtocolError
from proxy.codec.header import (
    Incomplete,
    encode_request_header,
    encode_response_header,
    frame,
    parse_response_prefix,
    response_header_length,
)
from proxy.codec.produce_prefix import parse_request_prefix

MAX = 104857600


def request(api_key, version, corr, client_id, body=b"", tagged=b"\x00"):
    head = struct.pack(">hhi", api_key, version, corr)
    head += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    return frame(head + tagged + body) if tagged is not None else frame(head + body)


def test_request_header_v1():
    raw = request(3, 8, 42, "my-client", body=b"\x00\x00\x00\x00", tagged=None)  # Metadata v8: not flexible
    h = parse_request_prefix(raw, MAX)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 8, 42, "my-client")
    assert h.header_length == 4 + 10 + len("my-client")
    assert h.frame_length == len(raw)


def test_request_header_v2_skips_tagged_fields():
    tagged = b"\x02" + b"\x00\x03abc" + b"\x05\x01z"  # two tagged fields
    raw = request(3, 12, 7, "c", body=b"BODY", tagged=tagged)  # Metadata v12: flexible
    h = parse_request_prefix(raw, MAX)
    assert raw[h.header_length :] == b"BODY"
    assert h.client_id == "c"


def test_null_client_id():
    h = parse_request_prefix(request(18, 3, 1, None, body=b"\x00\x00\x00"), MAX)
    assert h.client_id is None


def test_encoded_request_header_round_trips():
    for api_key, version in [(18, 0), (18, 3), (1, 11), (1, 12), (3, 9)]:
        raw = frame(encode_request_header(api_key, version, 99, "x") + b"BODY")
        h = parse_request_prefix(raw, MAX)
        assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (api_key, version, 99, "x")
        assert raw[h.header_length :] == b"BODY"


@pytest.mark.parametrize(
    "version,txn,acks", [(2, None, 0), (3, None, -1), (7, "txn-1", 1), (9, None, 0), (11, "t", -1)]
)
def test_produce_acks_peek(version, txn, acks):
    if version >= 9:
        tid = b"\x00" if txn is None else bytes([len(txn) + 1]) + txn.encode()
        raw = request(0, version, 5, "p", body=tid + struct.pack(">hi", acks, 30000) + b"\x00" * 4)
    elif version >= 3:
        tid = struct.pack(">h", -1) if txn is None else struct.pack(">h", len(txn)) + txn.encode()
        raw = request(0, version, 5, "p", body=tid + struct.pack(">hi", acks, 30000) + b"\x00" * 4, tagged=None)
    else:
        raw = request(0, version, 5, "p", body=struct.pack(">hi", acks, 30000) + b"\x00" * 4, tagged=None)
    h = parse_request_prefix(raw, MAX)
    assert h.acks == acks
    assert h.expects_response == (acks != 0)


def test_incomplete_then_complete():
    raw = request(3, 12, 7, "client", body=b"xyz")
    for cut in range(0, 4 + 10 + 6 + 1):
        with pytest.raises(Incomplete):
            parse_request_prefix(raw[:cut], MAX)
    assert parse_request_prefix(raw, MAX).correlation_id == 7


@pytest.mark.parametrize("size", [-1, -(2**31), MAX + 1])
def test_bad_sizes_are_protocol_errors(size):
    with pytest.raises(ProtocolError):
        parse_request_prefix(struct.pack(">i", size) + b"\x00" * 20, MAX)


def test_client_id_past_frame_is_protocol_error():
    raw = struct.pack(">ihhih", 12, 3, 1, 1, 200) + b"ab"
    with pytest.raises(ProtocolError):
        parse_request_prefix(raw, MAX)


def test_response_header_v0_and_v1():
    body = b"\x00\x00\x00\x00"
    v0 = frame(encode_response_header(3, 8, 11) + body)
    v1 = frame(encode_response_header(3, 12, 11) + body)
    assert parse_response_prefix(v0).correlation_id == 11
    assert parse_response_prefix(v1).correlation_id == 11
    assert response_header_length(3, 8, v0) == 8
    assert response_header_length(3, 12, v1) == 9


def test_api_versions_response_header_is_always_v0():
    # ApiVersions v3+ requests use header v2, but the response header stays v0 (no tagged fields).
    assert encode_response_header(18, 3, 5) == struct.pack(">i", 5)
    assert encode_request_header(18, 3, 5, "c").endswith(b"\x00")
    raw = frame(encode_response_header(18, 4, 5) + b"\x00\x23")
    assert response_header_length(18, 4, raw) == 8


def test_a_response_header_with_tagged_fields_is_skipped_whole():
    tagged = b"\x02\x00\x01\x07\x05\x02ab"  # two fields: tag 0 (1 byte), tag 5 (2 bytes)
    raw = frame(struct.pack(">i", 11) + tagged + b"\x00\x00")
    assert response_header_length(3, 12, raw) == 8 + len(tagged)
    with pytest.raises(ProtocolError):  # a section running past the frame
        response_header_length(3, 12, frame(struct.pack(">i", 11) + b"\x01\x00\x09"))


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_client_id_is_read_from_every_kind_of_buffer_and_must_be_utf8(kind):
    name = "consumer-é".encode()
    raw = frame(struct.pack(">hhih", 3, 12, 1, len(name)) + name + b"\x00" + b"\x00")
    assert parse_request_prefix(kind(raw), MAX).client_id == "consumer-é"
    bad = struct.pack(">ihhih", 12, 3, 8, 1, 2) + b"\xff\xfe" + b"\x00\x00"
    with pytest.raises(ProtocolError, match="not UTF-8"):
        parse_request_prefix(kind(bad), MAX)
