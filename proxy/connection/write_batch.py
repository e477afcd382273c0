"""Writes gathered while one read is split, sent with one ``writelines`` per side.

While one read is split, the frames (and pieces of frames) it yields for each side are queued and then sent with one
writelines each, one system call instead of one per frame: a read of many small requests (a pipelining producer)
costs the kernel one send, not dozens. The connection sends them (through its splicer, which owns the writes to
both sockets: :meth:`proxy.connection.splicing.Splicer.send_client`) before the read buffer may be reused or a splice
may start, and before it closes; the bytes and their order on each socket are unchanged.

:class:`PureWriteBatch` is the reference of the C twin (``proxy.connection._native.WriteBatch``,
proxy/connection/native/writes.c): the core writes each frame through :meth:`~PureWriteBatch.client` or
:meth:`~PureWriteBatch.broker` from the paths' loops, several times a read, and the twin's methods are called there
without a Python frame each. :data:`WriteBatch` is the one :mod:`proxy.connection.compiled` chose.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from proxy.codec.primitives import Bytes
from proxy.connection.compiled import NATIVE

Write = Callable[[Bytes], None]  # writes one frame, or a piece of one, to a side
Send = Callable[[list[Bytes]], None]  # writes several, in order, with one system call where it can


class PureWriteBatch:
    """The writes to each side of one connection: written at once (``write_client``, ``write_broker``) unless a
    batch is open (:meth:`start`), then queued until :meth:`send`."""

    __slots__ = ("_to_client", "_to_broker", "_write_client", "_write_broker", "_send_client", "_send_broker")

    def __init__(self, write_client: Write, write_broker: Write, send_client: Send, send_broker: Send) -> None:
        """``write_*``: writes one frame (or piece) to a side; ``send_*``: writes several, in order, at once."""
        self._to_client: list[Bytes] | None = None  # queued for the client while a read is split (None: write at once)
        self._to_broker: list[Bytes] | None = None
        self._write_client = write_client
        self._write_broker = write_broker
        self._send_client = send_client
        self._send_broker = send_broker

    def start(self, client: bool) -> bool:
        """Start queueing the writes to the broker (and to the client if ``client``); False if already queueing
        (an event inside another: the outer one sends)."""
        if self._to_broker is not None:
            return False
        self._to_broker = []
        if client:
            self._to_client = []
        return True

    def client(self, data: Bytes) -> None:
        queued = self._to_client
        if queued is None:
            self._write_client(data)
        else:
            queued.append(data)

    def broker(self, data: Bytes) -> None:
        queued = self._to_broker
        if queued is None:
            self._write_broker(data)
        else:
            queued.append(data)

    def route(self, client: bool, write: Write, send: Send) -> None:
        """From now on write to the client (or the broker) with ``write`` and ``send`` (a splicer routes a side
        straight to its transport while no splice owns the socket:
        :meth:`proxy.connection.splicing.Splicer.attach_writes`); nothing once closed."""
        if self._write_client is _dropped:
            return
        if client:
            self._write_client, self._send_client = write, send
        else:
            self._write_broker, self._send_broker = write, send

    def close(self) -> None:
        """The connection closed, what was queued sent: the references back to it dropped (no cycle keeps it), and
        any later write with them."""
        self._to_client = self._to_broker = None
        self._write_client = self._write_broker = _dropped
        self._send_client = self._send_broker = _dropped

    def send(self) -> None:
        """Send what was queued, the broker's first: a single frame as one write, several as one send; writes go
        out at once again until the next start (so a write made while these go out, by an event they cause, does
        too)."""
        to_client, self._to_client = self._to_client, None
        to_broker, self._to_broker = self._to_broker, None
        if to_broker:
            if len(to_broker) == 1:
                self._write_broker(to_broker[0])
            else:
                self._send_broker(to_broker)
        if to_client:
            if len(to_client) == 1:
                self._write_client(to_client[0])
            else:
                self._send_client(to_client)


def _dropped(data: object) -> None:
    pass


if TYPE_CHECKING or NATIVE is None:  # typed as the pure class: the twin has its methods
    WriteBatch = PureWriteBatch
else:
    WriteBatch = NATIVE.WriteBatch
