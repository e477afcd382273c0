"""Our codec against kio, an independent generated implementation of Kafka's schemas.

Both directions for every API version kio has: kio encodes -> we decode (same field values) and
re-encode byte-exactly; we encode -> kio decodes to the same values. Versions that Kafka 4.0
removed (Produce 0-2, Fetch 0-3, CreateTopics 0-1, DeleteTopics 0) are absent from kio; they are
checked against kafka-python in ``test_legacy_kafka_python.py``.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import messages as M
from tests.proxy.codec.strategies import (
    ALL_VERSIONS,
    kio_class,
    kio_entity_st,
    kio_has,
    kio_plain,
    message_st,
    ours_plain,
    register_kio_strategies,
)

pytest.importorskip("kio")
from kio.serial import entity_reader, entity_writer  # noqa: E402

register_kio_strategies()
KIO_VERSIONS = [c for c in ALL_VERSIONS if kio_has(*c)]
_SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))


def _codec(direction):
    return (M.decode_request, M.encode_request) if direction == "request" else (M.decode_response, M.encode_response)


@pytest.mark.parametrize("api_key,direction,version", KIO_VERSIONS)
@_SETTINGS
@given(data=st.data())
def test_kio_encodes_we_decode(api_key, direction, version, data):
    cls = kio_class(api_key, direction, version)
    entity = data.draw(kio_entity_st(cls))
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    body = buf.getvalue()
    decode, encode = _codec(direction)
    msg = decode(api_key, version, body)
    expected = kio_plain(entity)
    assert ours_plain(msg, expected) == expected
    assert encode(api_key, version, msg) == body


@pytest.mark.parametrize("api_key,direction,version", KIO_VERSIONS)
@_SETTINGS
@given(data=st.data())
def test_we_encode_kio_decodes(api_key, direction, version, data):
    cls = kio_class(api_key, direction, version)
    msg = data.draw(message_st(api_key, direction, version, kio_safe=True))
    _decode, encode = _codec(direction)
    body = encode(api_key, version, msg)
    entity, size = entity_reader(cls)(memoryview(body), 0)
    assert size == len(body)
    got = kio_plain(entity)
    assert ours_plain(msg, got) == got
