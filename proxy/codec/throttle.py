"""A throttle as it reaches the client: merged into the response's ``throttle_time_ms``, and whether the response
itself is held (KIP-13) or goes at once followed by a mute (KIP-219). Pure: bytes in, bytes out."""

from __future__ import annotations

from proxy.codec.apis import FETCH, client_throttles, has_throttle_time
from proxy.codec.messages import decode_response, encode_response


def merge_throttle(api_key: int, version: int, body: bytes | memoryview, throttle_time_ms: int) -> bytes | None:
    """The response body with ``throttle_time_ms = max(broker's, ours)``; None when the body stays as it is (the
    version has no such field, or the broker's throttle is already the longer)."""
    if not has_throttle_time(api_key, version):
        return None
    msg = decode_response(api_key, version, body)
    if msg.throttle_time_ms >= throttle_time_ms:
        return None
    msg.throttle_time_ms = throttle_time_ms
    return encode_response(api_key, version, msg)


def delays_response(api_key: int, version: int) -> bool:
    """True for versions before KIP-219, whose throttled responses are held (KIP-13) rather than followed by a mute.
    Fetch is the exception: a throttled Fetch v0-7 goes out and the mute holds the next fetch instead."""
    return api_key != FETCH and not client_throttles(api_key, version)
