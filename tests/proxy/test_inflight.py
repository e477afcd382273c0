"""Matching responses to requests, including acks=0 Produce with brokers that do and do not answer it."""

import pytest

from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.inflight import MAX_UNRESOLVED_SILENT, InFlightQueue


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


def test_unresolved_silent_entries_are_bounded():
    q = InFlightQueue()
    for c in range(MAX_UNRESOLVED_SILENT + 10):
        q.add(req(c, acks=0), 0)
    assert len(q) <= MAX_UNRESOLVED_SILENT
    assert q.broker_answers_acks0 is False


def test_mismatch_is_a_protocol_error():
    q = InFlightQueue()
    q.add(req(1), 0)
    with pytest.raises(ProtocolError):
        q.match(2)
    with pytest.raises(ProtocolError):
        InFlightQueue().match(1)
