"""A throttle as it reaches the client: merged into the response's ``throttle_time_ms``. Pure: bytes in, bytes out.

The response then goes at once and the connection is muted (:mod:`proxy.connection.flow`), in every version."""

from __future__ import annotations

from proxy.codec.apis import has_throttle_time
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
