"""A socket just accepted whose client already went, having sent nothing, costs no broker connection
(proxy.connection.presence.gone_unheard): asked of the kernel over real loopback sockets, without taking a byte."""

from __future__ import annotations

import socket
import struct

import pytest

from proxy.connection.presence import gone_unheard
from tests.harness import wait_until


@pytest.fixture
def listening():
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def accepted(server: socket.socket, client: socket.socket) -> socket.socket:
    conn, _ = server.accept()
    conn.setblocking(False)
    return conn


def test_a_client_that_closed_or_reset_unheard_is_gone(listening):
    client = socket.create_connection(listening.getsockname())
    client.close()  # FIN, nothing sent
    with accepted(listening, client) as conn:
        wait_until(lambda: gone_unheard(conn), 5, "the client's FIN seen")
    client = socket.create_connection(listening.getsockname())
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # RST
    with accepted(listening, client) as conn:
        wait_until(lambda: gone_unheard(conn), 5, "the client's reset seen")


def test_a_client_still_there_or_owed_an_answer_is_served_and_loses_no_byte(listening):
    with socket.create_connection(listening.getsockname()) as client:
        with accepted(listening, client) as conn:
            assert not gone_unheard(conn)  # connected, nothing sent yet
    client = socket.create_connection(listening.getsockname())
    client.sendall(b"request")
    client.shutdown(socket.SHUT_WR)  # a request, then a half-close: it may be reading its answer
    with accepted(listening, client) as conn:
        assert not gone_unheard(conn)
        conn.setblocking(True)
        assert conn.recv(100) == b"request"  # peeked, not taken
    client.close()
