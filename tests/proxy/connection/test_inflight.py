"""Matching responses to requests, including acks=0 Produce with brokers that do and do not answer it."""

import pytest

from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.connection.inflight import InFlightQueue


def req(corr, acks=None, api_key=3):
    return RequestHeader(100, 0 if acks is not None else api_key, 9, corr, "c", 20, acks)


def test_in_order_matching():
    q = InFlightQueue()
    for c in (1, 2, 3):
        q.add(req(c), 0)
    assert [q.match(c).header.correlation_id for c in (1, 2, 3)] == [1, 2, 3]
    assert len(q) == 0


def test_broker_that_answers_acks0_gets_its_answer_dropped():
    q = InFlightQueue()
    q.add(req(1, acks=0), 0)
    q.add(req(2), 0)
    assert q.match(1) is None  # Tansu answered the acks=0 produce: dropped
    assert q.broker_answers_acks0 is True
    assert q.match(2).header.correlation_id == 2


def test_broker_that_stays_silent_for_acks0():
    q = InFlightQueue()
    q.add(req(1, acks=0), 0)
    q.add(req(2, acks=0), 0)
    q.add(req(3), 0)
    assert q.match(3).header.correlation_id == 3
    assert q.broker_answers_acks0 is False
    q.add(req(4, acks=0), 0)  # no longer queued at all
    assert len(q) == 0


def test_a_probe_follows_the_first_acks0_request_and_tells_a_silent_broker():
    """Kafka never answers acks=0: the probe's response, arriving first, says so and retires the entries."""
    q = InFlightQueue()
    q.add(req(1, acks=0), 0)
    assert q.probe_wanted
    probe_frame = q.probe(0)
    probe_id = int.from_bytes(probe_frame[8:12], "big", signed=True)
    assert probe_frame[4:8] == b"\x00\x12\x00\x00"  # ApiVersions v0
    q.add(req(2, acks=0), 0)
    assert not q.probe_wanted  # one probe per connection
    assert q.match(probe_id) is None  # the probe's answer is dropped
    assert q.broker_answers_acks0 is False
    assert len(q) == 0  # the acks=0 entries queued meanwhile are retired with it


def test_a_probe_after_a_broker_that_answers_acks0():
    q = InFlightQueue()
    q.add(req(-2147483648, acks=0), 0)  # the probe's favourite id is taken: it picks another
    probe_id = int.from_bytes(q.probe(0)[8:12], "big", signed=True)
    assert probe_id != -2147483648
    assert q.match(-2147483648) is None
    assert q.broker_answers_acks0 is True
    assert q.match(probe_id) is None
    assert len(q) == 0


def test_1100_pipelined_acks0_produces_to_a_broker_that_answers_them_stay_in_sync():
    q = InFlightQueue()
    for c in range(1100):
        q.add(req(c, acks=0), 0)
        if q.probe_wanted:
            q.probe(0)
    assert len(q) == 1101  # bounded by the connection's in-flight bound, which counts these
    assert q.match(0) is None
    assert q.broker_answers_acks0 is True
    assert q.match(-2147483648) is None  # the probe was forwarded right after request 0
    for c in range(1, 1100):
        assert q.match(c) is None
    assert len(q) == 0


def test_mismatch_is_a_protocol_error():
    q = InFlightQueue()
    q.add(req(1), 0)
    with pytest.raises(ProtocolError):
        q.match(2)
    with pytest.raises(ProtocolError):
        InFlightQueue().match(1)
