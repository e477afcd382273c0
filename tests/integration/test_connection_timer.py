"""Each connection ends its own timeouts on its one timer (issue 36), over real loopback sockets.

Before, ``connections.max.idle.ms`` and ``upstream.response.timeout.ms`` were enforced only by the app's sweep,
once a second over every connection; the sweep is gone (the proxy's housekeeping only expires idle quota sensors),
and the connections close at their bounds through the flow's deadline, each close counted by reason and logged
with the connection's mute state by name (as Kafka's ``ChannelMuteState``). A client silent for a while, and a
client whose broker never answers, against a scripted broker; bounds with headroom for a loaded machine.
"""

from __future__ import annotations

import logging
import socket
import struct

import pytest

from proxy.codec.apis import API_VERSIONS
from proxy.codec.header import encode_request_header, frame
from tests.harness import proxy_config, start_proxy
from tests.integration.raw import read_frame
from tests.scripted_broker import ScriptedBroker, answer_normally

pytestmark = pytest.mark.integration

CLOSE_WITHIN_S = 20  # the bound is 1 s; the rest is headroom for a machine whose cores are all busy


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True


def _proxy(answer, **settings):
    broker = ScriptedBroker(answer).start()
    config = proxy_config(0, broker.port, **settings)
    config["dynamic_config"] = {"enabled": False}  # the scripted broker sees only the test's requests
    return broker, start_proxy(config)


def _closed(proxy, reason: str) -> float:
    return proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason=reason)


def test_a_silent_client_is_closed_by_its_own_timer_and_the_log_names_its_mute_state(caplog):
    broker, proxy = _proxy(answer_normally, **{"connections.max.idle.ms": 1000})
    caplog.set_level(logging.INFO, logger="proxy.connection.client_socket")
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        client.sendall(struct.pack(">ihhih", 10, API_VERSIONS, 0, 1, -1))
        assert struct.unpack_from(">i", read_frame(client), 0)[0] == 1  # answered: then silence
        assert _closed_within(client, CLOSE_WITHIN_S), "a client silent past connections.max.idle.ms stays open"
        assert _closed(proxy, "idle") == 1
        assert any("idle for 1000 ms (NOT_MUTED)" in r.getMessage() for r in caplog.records), caplog.text
    finally:
        proxy.stop(grace_ms=100)
        broker.stop()


def test_a_broker_that_never_answers_is_an_upstream_timeout_on_the_connections_timer(caplog):
    def answer(sock, header, request):
        if header.client_id != "stalled":
            answer_normally(sock, header, request)  # the stalled client's request is never answered

    broker, proxy = _proxy(answer, **{"upstream.response.timeout.ms": 1000})
    caplog.set_level(logging.INFO, logger="proxy.connection.client_socket")
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        client.sendall(frame(encode_request_header(API_VERSIONS, 0, 1, "stalled")))
        assert _closed_within(client, CLOSE_WITHIN_S), "a request the broker never answers keeps its client open"
        assert _closed(proxy, "upstream_timeout") == 1 and _closed(proxy, "idle") == 0
        assert any("did not answer within 1000 ms (NOT_MUTED)" in r.getMessage() for r in caplog.records), caplog.text
    finally:
        proxy.stop(grace_ms=100)
        broker.stop()
