"""A client connection's lifecycle: one named state and the transitions allowed between states (h11's
``_state.py``; Kroxylicious' ``ProxyChannelStateMachine``).

A connection is admitted before either of its sockets is usable. Its broker connection is opened first, then the
client socket wrapped (``BROKER_OPEN``); a TLS client's socket is wrapped once its handshake is done, before its
broker connection opens, and is not read until it is (``AWAITING_BROKER``). ``OPEN`` reads both as the flow says.
A client that half-closes has its half-close passed on to the broker after every request it sent
(``HALF_CLOSED``), or, while requests it sent are still held back by the flow, once they have gone (``EOF_PENDING``);
the broker's answers are still delivered, and the broker's own close then ends the connection. ``CLOSED`` is final
and says why (``connections_closed``' reason). Any other move raises :class:`IllegalTransition`: a bug in the
socket code, never a client's doing.

Why reading stops while a connection is open (quotas, back-pressure, draining) is the flow's state, not this one
(:mod:`proxy.connection.flow`).
"""

from __future__ import annotations

import enum


class ConnectionState(enum.Enum):
    ADMITTED = "admitted"  # counted as open; no broker connection yet, the client socket not wrapped
    BROKER_OPEN = "broker_open"  # the broker connection is open; the client socket not wrapped yet
    AWAITING_BROKER = "awaiting_broker"  # the client socket wrapped (TLS handshake done), not read: no broker yet
    OPEN = "open"  # both sockets open; the client read as its flow says
    EOF_PENDING = "eof_pending"  # the client half-closed; requests held back go to the broker before the half-close
    HALF_CLOSED = "half_closed"  # the client's half-close passed on to the broker; its answers still delivered
    CLOSED = "closed"


class Event(enum.Enum):
    BROKER_OPENED = "broker_opened"  # the broker connection opened
    CLIENT_WRAPPED = "client_wrapped"  # the client socket was wrapped (after its TLS handshake, on a TLS listener)
    CLIENT_EOF = "client_eof"  # the client half-closed; passed on to the broker at once
    CLIENT_EOF_HELD = "client_eof_held"  # the client half-closed while requests it sent were held back
    HELD_SENT = "held_sent"  # the requests held back have gone; the half-close passed on after them
    CLOSE = "close"


State = ConnectionState
TRANSITIONS: dict[ConnectionState, dict[Event, ConnectionState]] = {
    State.ADMITTED: {
        Event.BROKER_OPENED: State.BROKER_OPEN,
        Event.CLIENT_WRAPPED: State.AWAITING_BROKER,
        Event.CLOSE: State.CLOSED,
    },
    State.BROKER_OPEN: {Event.CLIENT_WRAPPED: State.OPEN, Event.CLOSE: State.CLOSED},
    State.AWAITING_BROKER: {Event.BROKER_OPENED: State.OPEN, Event.CLOSE: State.CLOSED},
    State.OPEN: {
        Event.CLIENT_EOF: State.HALF_CLOSED,
        Event.CLIENT_EOF_HELD: State.EOF_PENDING,
        Event.CLOSE: State.CLOSED,
    },
    State.EOF_PENDING: {Event.HELD_SENT: State.HALF_CLOSED, Event.CLOSE: State.CLOSED},
    State.HALF_CLOSED: {Event.CLOSE: State.CLOSED},
    State.CLOSED: {},
}


class IllegalTransition(RuntimeError):
    """An event the lifecycle does not allow in its current state."""


class Lifecycle:
    __slots__ = ("state", "closed_reason")

    def __init__(self) -> None:
        self.state = State.ADMITTED
        self.closed_reason: str | None = None  # why it closed, once CLOSED

    def on(self, event: Event) -> ConnectionState:
        """Move on ``event``; the new state. Raises :class:`IllegalTransition` if the table has no such move."""
        new = TRANSITIONS[self.state].get(event)
        if new is None:
            raise IllegalTransition(f"a client connection in {self.state.name} cannot take {event.name}")
        self.state = new
        return new

    def close(self, reason: str) -> bool:
        """Close for ``reason``; False (nothing done) if already closed, as a second close is a no-op."""
        if self.state is State.CLOSED:
            return False
        self.on(Event.CLOSE)
        self.closed_reason = reason
        return True

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    @property
    def client_done(self) -> bool:
        """The client's half-close has been seen: a broker that closes now ends the connection normally."""
        return self.state is State.EOF_PENDING or self.state is State.HALF_CLOSED
