"""A gone client costs the broker at most what may be in flight (issue 44, T2): the connection core on bytes, the
kernel's answer to "is the client still connected?" (proxy.connection.presence) played by the test."""

import struct

from config.loader import parse_config
from proxy.apis import ConnectionScope
from proxy.cluster.topics import Topics
from proxy.codec.apis import API_VERSIONS, PRODUCE
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.codec.messages import encode_request, encode_response, new_request, new_response
from proxy.connection.core import ConnectionCore
from proxy.connection.presence import GONE, HALF_CLOSED, PRESENT
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.session.session import Session
from tests.fakes import NULL_API_METRICS

MAX_INFLIGHT = 5


def acks0(corr: int) -> bytes:
    """A Produce v3 with acks=0 and no topics: the attack's 30-byte frame."""
    body = encode_request(PRODUCE, 3, new_request(PRODUCE, 3, acks=0, timeout_ms=1000, topic_data=[]))
    return frame(encode_request_header(PRODUCE, 3, corr, "evil") + body)


class Wire:
    def __init__(self, present) -> None:
        self.to_client, self.to_broker = bytearray(), bytearray()
        self.asked = 0
        self.now = 1_000_000

        def client_state() -> str:
            self.asked += 1
            found = present(self.asked)
            return found if isinstance(found, str) else PRESENT if found else GONE

        config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
        scope = ConnectionScope(None, Topics(), ProxyQuotas(config).home)
        self.core = ConnectionCore(
            scope,
            Session("L", "127.0.0.1"),
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=MAX_INFLIGHT,
            write_client=self.to_client.extend,
            write_broker=self.to_broker.extend,
            clock=lambda: self.now,
            api_metrics=lambda key: NULL_API_METRICS,
            client_state=client_state,
        )

    def forwarded(self) -> list[tuple[int, int]]:
        """(api key, correlation id) of each frame written to the broker since the last call."""
        out = []
        while self.to_broker:
            size, api_key, _, corr = struct.unpack_from(">ihhi", self.to_broker)
            out.append((api_key, corr))
            del self.to_broker[: size + 4]
        return out

    def silent_broker_answers_probe(self, probe_corr: int):
        """Apache Kafka sends nothing for acks=0; the proxy's probe (ApiVersions v0) shows it."""
        self.core.broker_bytes(
            memoryview(
                frame(
                    encode_response_header(API_VERSIONS, 0, probe_corr)
                    + encode_response(API_VERSIONS, 0, new_response(API_VERSIONS, 0))
                )
            )
        )
        return self.core.step(self.now)


def attack() -> bytes:
    return b"".join(acks0(corr) for corr in range(1, 1001))


def test_a_client_gone_with_a_thousand_acks0_requests_in_its_socket_costs_the_broker_at_most_the_in_flight_bound():
    """The 1,000 frames arrive in one read, the client's FIN behind them. The first requests go; where reading
    pauses (the in-flight bound: acks=0 requests count until the proxy's probe shows whether the broker answers
    them) with requests unheard from the client, the kernel is asked, says it is gone, and none of the rest is
    forwarded, nothing more is read, and the connection closes at once (drained: the probe's answer is dropped
    anyway)."""
    wire = Wire(lambda asked: False)
    wire.core.client_bytes(memoryview(attack()))
    state = wire.core.step(wire.now)
    sent = wire.forwarded()
    probe = [corr for key, corr in sent if key == API_VERSIONS]
    produces = [corr for key, corr in sent if key == PRODUCE]
    assert len(probe) == 1 and produces == [1, 2, 3, 4], "a gone client's buffered requests were forwarded"
    assert wire.asked == 1 and wire.core.flow.left
    assert state.drained and not state.reading_client
    assert wire.core.flow.read_ahead_bytes == 0  # the rest is dropped, not kept
    wire.silent_broker_answers_probe(probe[0])
    assert wire.forwarded() == []


def test_without_a_pause_the_kernel_is_asked_after_the_in_flight_bound_of_requests():
    """Once the broker is known to stay silent for acks=0, nothing pauses: the question comes after MAX_INFLIGHT
    requests unheard from the client."""
    wire = Wire(lambda asked: False)
    wire.core.client_bytes(memoryview(acks0(1)))
    wire.silent_broker_answers_probe([c for key, c in wire.forwarded() if key == API_VERSIONS][0])
    wire.core.flow.client_read(wire.now)
    wire.core.client_bytes(memoryview(attack()))
    state = wire.core.step(wire.now)
    assert [c for _, c in wire.forwarded()] == [1, 2, 3, 4, 5] and wire.asked == 1 and state.drained


def test_a_client_still_there_is_asked_once_per_in_flight_bound_and_loses_nothing():
    wire = Wire(lambda asked: True)
    wire.core.client_bytes(memoryview(attack()))
    probe = [corr for key, corr in wire.forwarded() if key == API_VERSIONS]
    state = wire.silent_broker_answers_probe(probe[0])
    produces = [corr for key, corr in wire.forwarded() if key == PRODUCE]
    assert produces == list(range(5, 1001)) and state.reading_client and not wire.core.flow.left
    assert wire.asked == 1000 // MAX_INFLIGHT  # at the pause for the probe's answer, then every MAX_INFLIGHT


def test_a_read_resets_the_count_so_a_client_sending_one_request_per_read_is_never_asked():
    wire = Wire(lambda asked: False)
    for corr in range(1, 50):
        wire.core.flow.client_read(wire.now)
        wire.core.client_bytes(memoryview(acks0(corr)))
        if corr == 1:
            probe = [c for key, c in wire.forwarded() if key == API_VERSIONS]
            wire.silent_broker_answers_probe(probe[0])
    assert wire.asked == 0 and [c for _, c in wire.forwarded()] == list(range(2, 50))


def test_a_client_that_leaves_after_the_first_question_loses_only_what_followed():
    """Present at the first look (the pause), gone at the second: at most MAX_INFLIGHT more go after it left."""
    wire = Wire(lambda asked: asked < 2)
    wire.core.client_bytes(memoryview(attack()))
    probe = [corr for key, corr in wire.forwarded() if key == API_VERSIONS]
    wire.silent_broker_answers_probe(probe[0])
    produces = [corr for key, corr in wire.forwarded() if key == PRODUCE]
    assert produces == [5, 6, 7, 8, 9] and wire.asked == 2 and wire.core.flow.left


def test_a_half_closed_client_owed_answers_is_still_served_but_one_owed_none_is_gone():
    """A FIN may be a half-close: a client that sent 20 ApiVersions and shut its sending side still reads their
    answers (a Kafka broker, reading one request at a time, answers them all), so while it is owed answers it counts
    as present, without a system call; an acks=0 flood followed by a FIN is owed none: gone."""
    wire = Wire(lambda asked: HALF_CLOSED)
    api_versions = b"".join(frame(encode_request_header(API_VERSIONS, 0, corr, "c")) for corr in range(1, 21))
    wire.core.client_bytes(memoryview(api_versions))
    wire.core.step(wire.now)
    assert [c for _, c in wire.forwarded()] == [1, 2, 3, 4, 5] and not wire.core.flow.left
    assert wire.asked == 0  # owed answers: not even asked (writing them shows a reset)
    flood = Wire(lambda asked: HALF_CLOSED)
    flood.core.client_bytes(memoryview(attack()))
    assert flood.core.flow.left and [c for key, c in flood.forwarded() if key == PRODUCE] == [1, 2, 3, 4]
