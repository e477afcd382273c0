"""The client-side connection: the only code that touches a client socket, and the shell around the flow.

Its lifecycle, admitted to closed, is one named state (:mod:`~proxy.connection.lifecycle`); no byte a client sends
goes anywhere before its broker connection is open. Requests go through
:class:`~proxy.connection.request_path.RequestPath`, responses through
:class:`~proxy.connection.response_path.ResponsePath`; every reason to stop reading either socket lives in one pure
:class:`~proxy.connection.flow.Flow`. After each socket event this shell applies the flow's state: reading on or off on
each side, held-back requests replayed, one timer for the next deadline (:mod:`~proxy.connection.one_timer`). Around
it, each its own module: opening the broker connection (:mod:`~proxy.connection.broker_dial`), the writes queued while
a read is split (:mod:`~proxy.connection.write_batch`), what the connection is counted in
(:mod:`~proxy.connection.counted`), the proxy's own work a request waits on (:mod:`~proxy.connection.own_work`), and
splicing a large frame's rest (a :class:`~proxy.connection.splicing.Splicer`, handed the core and the transports)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from proxy.codec.errors import ProtocolError
from proxy.connection.broker_dial import dial_broker
from proxy.connection.broker_socket import UpstreamConnection
from proxy.connection.client_context import (
    ApiMetricsCache,
    ListenerContext,
    PeerAddress,
    bounded,
    said_broker_error,
    said_broker_lost,
    said_frame_error,
    said_overdue,
)
from proxy.connection.core import CLOSED_CORE, ConnectionCore
from proxy.connection.counted import Counted
from proxy.connection.lifecycle import ConnectionState as State
from proxy.connection.lifecycle import Event, Lifecycle
from proxy.connection.one_timer import OneTimer
from proxy.connection.own_work import Done, Start, run_own_work
from proxy.connection.presence import client_state
from proxy.connection.shell import Shell
from proxy.connection.splicing import Splicer
from proxy.connection.write_batch import WriteBatch
from proxy.session.principals import MappingError, certificate_principal
from proxy.session.session import Session

log = logging.getLogger(__name__)

__all__ = ["ClientConnection", "ListenerContext", "bounded"]  # the last two: proxy.connection.client_context


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(self, ctx: ListenerContext) -> None:
        self.ctx = ctx
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.upstream_name = "-"
        self.upstream: UpstreamConnection | None = None  # set with BROKER_OPEN (or OPEN, after AWAITING_BROKER)
        self.life = Lifecycle()  # admitted, open, half-closed, closed (proxy.connection.lifecycle)
        self.session = Session(ctx.name, "?", admin_listener=ctx.scope.admin_address is not None)
        if ctx.sasl:  # until the broker accepts an authentication, frames are bounded as Kafka bounds them
            self.session.request_limit = min(ctx.pre_auth_max_bytes, ctx.max_request_bytes)
            self.session.authenticated_limit = ctx.max_request_bytes
            self.session.awaiting_authentication = True
        self._loop = asyncio.get_running_loop()
        # the per-API metrics by key, looked up with no Python call once known
        self._api_cache = ApiMetricsCache(ctx.metrics, ctx.name)
        self.splices = Splicer(
            self._loop, self, enabled=ctx.splice, spliced_bytes=ctx.metrics.spliced_bytes, listener=ctx.name
        )
        splices = self.splices
        self._writes = WriteBatch(splices.write_client, splices.write_broker, splices.send_client, splices.send_broker)
        splices.attach_writes(self._writes)  # each side straight to its transport while no splice owns it
        self.core = ConnectionCore(
            ctx.scope,
            self.session,
            max_request_bytes=ctx.max_request_bytes,
            max_response_bytes=ctx.max_response_bytes,
            max_inflight=ctx.max_inflight_requests,
            write_client=self._writes.client,
            write_broker=self._writes.broker,
            clock=time.monotonic_ns,
            api_metrics=self._api_cache.__getitem__,
            spawn=self._spawn,
            max_header_bytes=ctx.max_header_bytes,
            response_timeout_ns=ctx.response_timeout_ns,
            idle_timeout_ns=ctx.idle_timeout_ns,
            client_state=lambda: client_state(self.transport),
            usage=ctx.usage,
        )
        self.flow = self.core.flow
        self.splices.attach_core(self.core)
        self._timer = OneTimer(self._loop, self._apply_state)  # at the flow's deadline, whatever its state
        self._counted = Counted(ctx)
        # what the event loop calls at each read of either socket, and the flow's state applied after every event
        # (proxy.connection.shell): given to the loop as this protocol's own, before its transport is made
        self.shell = shell = Shell(
            self, self.core, ctx, self._writes, splices, self._counted, self._loop, time.monotonic_ns
        )
        self.get_buffer = shell.client_buffer  # type: ignore[method-assign]
        self.buffer_updated = shell.client_read  # type: ignore[method-assign]
        self._apply = shell.apply

    # -- client socket events ------------------------------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, base)  # a stream connection's (typeshed: its base)
        transport.set_write_buffer_limits(high=self.ctx.max_buffered_response_bytes)
        life = self.life
        if life.closed:  # the broker went away while the socket was being wrapped
            transport.close()
            return
        self.session.peer = transport.get_extra_info("peername")
        self.splices.attach_client(transport)
        self.session.local = transport.get_extra_info("sockname")
        if life.on(Event.CLIENT_WRAPPED) is State.AWAITING_BROKER:  # a TLS client, its broker not yet open: not read
            transport.pause_reading()
        elif self.upstream is not None:
            self.shell.open(transport, self.upstream)
        if self.ctx.ssl_context is not None:
            self._tls_principal(transport.get_extra_info("peercert"))
        if not life.closed:
            self._timer.arm(self.flow.next_deadline(), time.monotonic_ns())  # the timeouts' first check

    @property
    def closed(self) -> bool:
        return self.life.closed

    def _tls_principal(self, cert: dict[str, Any] | None) -> None:
        """mTLS: the client certificate's subject, mapped by the listener's rules, is the principal."""
        try:
            user = certificate_principal(cert, self.ctx.principal_rules)
        except MappingError as exc:
            log.warning("listener %s: client %s refused: %s", self.ctx.name, self.peer, bounded(exc))
            self.close("tls_principal_unmapped")
            return
        if user is not None:  # else no client certificate (client_auth none or requested): ANONYMOUS, as Kafka
            self.session.user = user

    def accepted(self, peer: PeerAddress | None, counted_ip: str | None = None, claimed: bool = False) -> None:
        """Count the connection as open; called once, when it is admitted (before it has an upstream).
        ``counted_ip``: the IP the connection quotas counted it under, released when it closes."""
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.session.peer_ip = peer[0] if peer else "?"
        self._counted.opened(self, counted_ip, claimed)

    async def connect_upstream(self) -> bool:
        """Open the broker connection, trying each bootstrap server in turn; False closes the client."""
        dialed = await dial_broker(self.ctx, self, self.peer)
        if isinstance(dialed, str):  # why the client is closed
            self.close(dialed)
            return False
        upstream, address = dialed
        if self.life.closed:
            upstream.close()
            return False
        self.upstream = upstream
        self.upstream_name = str(address)
        self.splices.attach_broker(upstream)
        self.ctx.on_upstream_result(True)
        # a TLS client, its handshake done, is read now as its flow says, what it sent meanwhile first; else the
        # client socket is wrapped next
        if self.life.on(Event.BROKER_OPENED) is State.OPEN and self.transport is not None:
            self.shell.open(self.transport, upstream)
            self._apply_state()
            if self.shell.reading_client and not self.closed:
                self.transport.resume_reading()
        return True

    def _read_client(self, nbytes: int) -> None:
        """Bytes read from the client before the connection is open, which the shell hands here: a TLS client's, its
        broker connection not open yet, read before the pause took (uvloop may); held back till it is open."""
        self.flow.client_read(time.monotonic_ns())  # the idle timeout starts anew
        self.flow.hold_back(self.ctx.request_buffer.view[:nbytes])

    def eof_received(self) -> bool:
        """The client is done sending: pass the half-close on, so the broker still processes (and answers)
        everything already forwarded before it sees the end, then closes its side, which closes ours. (Closing the
        broker socket at once would reset it while answers were on their way: a broker may drop what it had received
        but not yet read.)"""
        if self.life.state is State.CLOSED:
            return False  # closed already (its core gone): asyncio may still report an end it had read
        self.core.requests.client_gone()  # a Produce held for its new producer id is never forwarded now
        upstream = self.upstream
        if self.life.state is not State.OPEN or upstream is None:
            return False  # nothing to pass it on to: asyncio closes the client socket, and the connection with it
        if upstream.transport.is_closing():
            return False
        if not self.core.at_frame_boundary:
            log.info("client %s closed in the middle of a request", self.peer)
        if self.flow.read_ahead_bytes:
            # Requests held back still go first; _apply passes the half-close on after. (Reading is off while
            # anything is held back, so asyncio should not report the end then; this keeps the order if it does.)
            self.life.on(Event.CLIENT_EOF_HELD)
        else:
            upstream.writer.write_eof()
            self.life.on(Event.CLIENT_EOF)
        return True  # keep our side open to deliver the remaining answers

    def connection_lost(self, exc: Exception | None) -> None:
        self.close("client_closed")

    def pause_writing(self) -> None:  # the client takes no more response bytes (or a response splice waits on it)
        if not self.closed:
            self.flow.client_backpressure(True, time.monotonic_ns())
            self._apply()

    def resume_writing(self) -> None:
        if not self.closed:
            self.flow.client_backpressure(False, time.monotonic_ns())
            self._apply()

    # -- broker socket events (reported by UpstreamConnection) ----------------------------------------------------

    def broker_reads(self, upstream: UpstreamConnection) -> tuple[Callable[[int], memoryview], Callable[[int], None]]:
        return self.shell.broker_reads(upstream)

    def _broker_error(self, exc: ProtocolError) -> None:
        self.close(said_broker_error(log, self.ctx, self.peer, self.upstream_name, exc))

    def broker_backpressure(self, on: bool) -> None:
        if not self.closed:
            self.flow.broker_backpressure(on)
            self._apply()

    def broker_lost(self, exc: Exception | None) -> None:
        if self.life.client_done:
            self.close("client_closed")  # the broker closed after the client's half-close: the normal end
        elif not self.life.closed:
            self.close(said_broker_lost(log, self.ctx, self.peer, self.upstream_name, exc))

    # -- what the splicer reports (proxy.connection.splicing.SpliceEvents) ---------------------------------------

    def spliced_client_read(self) -> None:
        self.flow.client_read(time.monotonic_ns())  # the idle timeout starts anew, as for a read

    def splice_ended(self, direction: str) -> None:
        transport, upstream = self.transport, self.upstream
        if self.closed or transport is None or upstream is None:
            pass
        elif direction == "request":  # the source's end, if the splice met it, is met again by its transport
            if self.shell.reading_client:
                transport.resume_reading()
        else:
            upstream.set_reading(self.shell.reading_broker)
        self._apply()

    def splice_lost(self, client: bool, exc: OSError) -> None:
        if client:
            self.close("client_closed")
        else:
            self.broker_lost(exc)

    # -- applying the flow --------------------------------------------------------------------------------------

    def _apply_state(self) -> None:
        """After an event that the shell's ``apply`` (this connection's ``_apply``) finds not in the common case:
        replay held-back requests, decide holds, set reading, arm the timer."""
        flow, life, transport = self.flow, self.life, self.transport
        if life.closed or transport is None or life.state is State.AWAITING_BROKER:  # (applied once it is open)
            return
        now = time.monotonic_ns()
        # Requests replayed from the read-ahead go out together; answers the proxy makes to them go out one by one,
        # so a client that stops taking them stops the replay at the next boundary (its back-pressure comes at once).
        batch = self._writes.start(False)
        try:
            state = self.core.step(now)
        except ProtocolError as exc:  # held-back requests replayed
            self._frame_error("request", exc)
            return
        finally:
            if batch:
                self._writes.send()
        if life.closed:
            return
        if state.overdue is not None:
            # the broker stopped answering, or the client has been idle too long: said, then closed
            self.close(said_overdue(log, self.ctx, self.peer, self.upstream_name, flow.mute_state, state.overdue))
            return
        if state.drained:  # shutting down, or the client left (flow.client_left) and nothing more is owed
            self.close("client_closed" if self.flow.left else "shutdown")
            return
        upstream = self.upstream
        if life.state is State.EOF_PENDING and not flow.read_ahead_bytes and upstream is not None:
            life.on(Event.HELD_SENT)
            if not upstream.transport.is_closing():
                upstream.writer.write_eof()
        shell = self.shell
        if state.reading_client != shell.reading_client:
            shell.reading_client = state.reading_client
            if self.splices.request is not None:
                pass  # the splice reads the client; reading resumes (or not) when it ends
            elif state.reading_client:
                transport.resume_reading()
            else:
                transport.pause_reading()
        if state.reading_broker != shell.reading_broker and upstream is not None:
            shell.reading_broker = state.reading_broker
            if state.reading_broker:
                flow.broker_read_resumed(now)
            if self.splices.response is None:  # else the splice reads the broker; set again when it ends
                upstream.set_reading(state.reading_broker)
        self._counted.follow_bound(flow.at_bound, self._loop.time)
        self._timer.arm(state.deadline, now)

    # -- the proxy's own work ------------------------------------------------------------------------------------

    def _spawn(self, start: Start, done: Done) -> None:
        """Run the proxy's own work for a request as a task (:mod:`proxy.connection.own_work`); its result goes to
        ``done`` on this connection, then the flow's state is applied. Nothing happens if it closed meanwhile."""
        run_own_work(
            self._loop,
            start,
            done,
            closed=lambda: self.closed,
            frame_error=lambda exc: self._frame_error("request", exc),
            then=self._apply,
        )

    def _frame_error(self, direction: str, exc: ProtocolError) -> None:
        said_frame_error(log, self.ctx, self.peer, self.session.peer_ip, direction, exc)
        self.close("frame_error")

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def drain(self) -> None:
        """Shutdown: finish the requests in flight, read no new ones, then close."""
        if self.closed:
            return
        self.flow.drain()
        self._apply()

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self._writes.send()  # what was split before the end goes out first, as if written at once
        self.life.close(reason)
        self.shell.close()
        self._counted.closed(self, reason, self._loop.time())
        self._timer.close()
        self.splices.close()  # before the transports close: a splice's duplicate fds would keep the sockets open
        # Break every reference cycle now, so a closed connection is freed at once, not by the cycle collector.
        self.core.close()
        # the stand-in has only what a socket event after the close reaches (reading sizes, bytes fed): the rest of
        # the core is reached only while the lifecycle is open
        self.core = cast(ConnectionCore, CLOSED_CORE)
        self._writes.close()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        if self.upstream is not None:
            self.upstream.close()
            self.upstream.detach()

    def abort(self) -> None:
        """Grace period over: close now, dropping whatever is still in flight."""
        self.close("shutdown_timeout")
        if self.transport is not None:
            self.transport.abort()
