"""Our codec against itself: round trips (with injected unknown tagged fields) and bad input.

decode(encode(x)) == x and encode(decode(b)) == b byte for byte in every version; truncated,
bit-flipped, extended or random bodies raise ProtocolError and nothing else.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import messages as M
from proxy.codec.errors import ProtocolError
from tests.proxy.codec.strategies import ALL_VERSIONS, codec_of, message_st

_SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("api_key,direction,version", ALL_VERSIONS)
@_SETTINGS
@given(data=st.data())
def test_round_trip_with_unknown_tags(api_key, direction, version, data):
    decode, encode = codec_of(direction)
    msg = data.draw(message_st(api_key, direction, version, unknown_tags=True))
    body = encode(api_key, version, msg)
    back = decode(api_key, version, body)
    assert back == msg
    assert encode(api_key, version, back) == body


@pytest.mark.parametrize("api_key,direction,version", ALL_VERSIONS)
@_SETTINGS
@given(data=st.data())
def test_malformed_bodies_raise_protocol_error(api_key, direction, version, data):
    decode, encode = codec_of(direction)
    body = encode(api_key, version, data.draw(message_st(api_key, direction, version, unknown_tags=True)))
    if body:
        cut = data.draw(st.integers(0, len(body) - 1))
        with pytest.raises(ProtocolError):
            decode(api_key, version, body[:cut])  # truncated
    with pytest.raises(ProtocolError):
        decode(api_key, version, body + data.draw(st.binary(min_size=1, max_size=4)))  # trailing bytes
    flipped = bytearray(body)
    if flipped:
        i = data.draw(st.integers(0, len(body) - 1))
        flipped[i] ^= data.draw(st.integers(1, 255))
    for mutated in (bytes(flipped), data.draw(st.binary(max_size=64))):
        try:
            decode(api_key, version, mutated)
        except ProtocolError:
            pass


@pytest.mark.parametrize("api_key,version", [(0, 3), (0, 9), (1, 12), (3, 12)])
def test_huge_array_count_is_rejected_quickly(api_key, version):
    # An array length of 2**31-1 with a few bytes behind it must fail at once, not allocate or loop.
    body = b"\x7f\xff\xff\xff" * 8
    with pytest.raises(ProtocolError):
        M.decode_request(api_key, version, body)
