"""A listener: the proxy's own accept loop for one named listener, and its connection limits (KIP-612, KIP-402).

Accepting is our own loop rather than ``loop.create_server``, so that a connection-rate delay really stops
accepting: while the loop waits, new connections stay in the kernel's backlog, as behind Kafka's acceptor. Otherwise
it takes what the kernel has queued, up to :data:`ACCEPT_BATCH` a turn of the event loop (one a turn left a flood's
connections, and a newcomer behind them, in the kernel's first-come-first-served queue). After the accept, a
connection from an IP over its ``connection_creation_rate`` is held (no broker connection, nothing read) for up to a
second and then admitted or closed; one over a count limit is closed at once. The decisions are
:class:`quota.managers.connection.ConnectionQuotas`'; this module only acts on them.

An admitted connection waits for its setup (its broker connection, the client socket wrapped) in a
:class:`~proxy.connection.setup_queue.SetupQueue`, taken in turn by network and by address; at most
:data:`SETUPS_AT_ONCE` are set up at once (:data:`SETUPS_PER_NETWORK` of one network, half of them of one address),
each counted until its connection is open or for :data:`SETUP_SLOT_S` at most (a slow broker or a slow TLS client
does not stop the rest). Past the queue's capacity, or where its descriptors would eat into the reserve, the oldest
connection of the longest queue is closed unserved (``setup_queue_full``): a flood of connections pays for itself,
and a client from elsewhere is set up within a few turns (issue 44). Once the queue is full, a connection from an
address holding its share of it is closed as soon as it is accepted, before any other work
(:meth:`~proxy.connection.setup_queue.SetupQueue.crowded`): while a flood comes faster than the proxy sets it up,
each of its connections costs an accept and a close, and the accept loop empties the kernel's queue each turn.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from proxy.connection.client_context import PeerAddress, log_fields
from proxy.connection.client_socket import ClientConnection, ListenerContext, bounded
from proxy.connection.descriptors import FD_RESERVE
from proxy.connection.held_queue import HeldQueue
from proxy.connection.open_gate import CLAIMED, UNCLAIMED
from proxy.connection.presence import gone_unheard
from proxy.connection.setup_queue import SetupQueue, Turn
from proxy.ground.logs import LogLimiter
from proxy.ground.tasks import cancel_and_wait
from quota.managers.connection import IP_RATE, Admit, Close, Hold, normalize_ip

log = logging.getLogger(__name__)

ACCEPT_ERROR_BACKOFF_S = 0.1  # after EMFILE and the like, so a full fd table does not spin the loop
MAX_HELD = 10_000  # connections held for their IP's rate at once, per listener port; more are closed at once
HELD_SLACK_S = 0.001  # a held connection due this soon is let out now (a timer fires on the millisecond)
LISTEN_BACKLOG = 1024  # connections the kernel queues for the accept loop (capped by net.core.somaxconn)
ACCEPT_BATCH = LISTEN_BACKLOG  # taken from the kernel's queue in one turn of the event loop, at most: all it holds
SETUP_QUEUE_CAPACITY = 1024  # admitted connections waiting for their setup, per listener port
SETUPS_AT_ONCE = 64  # connections being set up at once, per listener port
SETUPS_PER_NETWORK = 8  # of them from one network (an IPv4 /24, an IPv6 /64)
SETUP_SLOT_S = 0.25  # the longest one setup keeps others waiting (a slow broker or TLS client, an idle client)
SETUP_QUEUE_FULL = "setup_queue_full"  # why a waiting connection is closed unserved (connections_closed's reason)
REJECT_LOG = LogLimiter()  # one line per IP and reason every 10 s
HANDSHAKE_LOG = LogLimiter()  # failed TLS handshakes: one line per IP every 10 s


def peer_ip(peer: PeerAddress | None) -> str:
    if not peer:
        return "?"
    ip = peer[0]
    if ":" in ip:  # IPv6, or IPv4 mapped into it on a dual-stack socket
        try:
            return normalize_ip(ip.split("%", 1)[0])
        except ValueError:
            return ip
    return ip


class Listener:
    def __init__(self, ctx: ListenerContext, host: str, port: int, reuse_port: bool = False) -> None:
        self.ctx = ctx
        self._reuse_port = reuse_port  # workers: several processes accept on this port, the kernel spreads them
        self._host = host
        self._port = port
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self._held: HeldQueue[tuple[socket.socket, PeerAddress, str]] = HeldQueue()  # for their IP's rate
        self._held_timer: asyncio.TimerHandle | None = None  # ends the first held connection's wait
        self._waiting: SetupQueue[tuple[socket.socket, PeerAddress, str]] = SetupQueue(
            SETUP_QUEUE_CAPACITY, SETUPS_PER_NETWORK
        )
        # the setups under way, each with the end of its slot and its turn (network and address)
        self._setting_up: dict[asyncio.Task[Any], tuple[asyncio.TimerHandle, Turn]] = {}
        self.address: tuple[str, int] | None = None
        self._crowded_detail = (
            f"{SETUP_QUEUE_CAPACITY} connections were waiting for their setup, the most from its address"
        )

    async def start(self) -> tuple[str, int]:
        return self.start_now()

    def start_now(self) -> tuple[str, int]:
        """Bind and start accepting; must be called from the running event loop."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server(
            (self._host, self._port), family=family, backlog=LISTEN_BACKLOG, reuse_port=self._reuse_port
        )
        sock.setblocking(False)
        self._sock = sock
        address: tuple[str, int] = sock.getsockname()[:2]  # (an IPv6 address's flow info and scope id cut)
        self.address = address
        self._task = asyncio.get_running_loop().create_task(self._accept_loop(sock))
        return address

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        ctx = self.ctx
        quotas, clock = ctx.connection_quotas, ctx.clock
        accepted = ctx.metrics.connections_accepted.labels(ctx.name)
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)  # the first of a batch: waits for one
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                log.warning("listener %s: accept failed: %s", ctx.name, exc)
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_S)
                continue
            for n in range(ACCEPT_BATCH):
                if n:  # the rest of what the kernel has queued, without a turn of the loop each
                    try:
                        conn, peer = sock.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError as exc:
                        log.warning("listener %s: accept failed: %s", ctx.name, exc)
                        break
                accepted.inc()
                ip = peer_ip(peer)
                if self._waiting.crowded(ip):  # the flood's own: closed before any other work
                    ctx.usage.row(ctx.name, ip, None, None, None).connections_opened += 1  # as a shed one always was
                    self._reject(conn, ip, Close(SETUP_QUEUE_FULL, self._crowded_detail))
                    continue
                if not ctx.descriptors.room() and not (self._make_room() and ctx.descriptors.room()):
                    self._reject(conn, "*", Close(FD_RESERVE, ctx.descriptors.detail()))
                    continue
                try:
                    conn.setblocking(False)
                    tune(conn, ctx)
                    delay_ms = quotas.accept_delay_ms(ctx.name, clock.now_ms())
                    if delay_ms > 0:  # over the proxy-wide or listener rate: the next connections wait in the backlog
                        await asyncio.sleep(delay_ms / 1000.0)
                except BaseException:
                    conn.close()
                    raise
                ctx.usage.row(ctx.name, ip, None, None, None).connections_opened += 1  # NO_USAGE: kept nowhere
                self._act(quotas.admit(ctx.name, ip, clock.now_ms()), conn, peer, ip)
                if delay_ms > 0:
                    break

    def _act(self, decision: Admit | Hold | Close, conn: socket.socket, peer: PeerAddress, ip: str) -> None:
        loop = asyncio.get_running_loop()
        if isinstance(decision, Admit):
            self._wait_for_setup(conn, peer, ip)
        elif isinstance(decision, Hold):
            if len(self._held) >= MAX_HELD:
                self._reject(
                    conn,
                    ip,
                    Close(
                        IP_RATE,
                        f"{ip} is over its connection_creation_rate and {MAX_HELD} connections are already held",
                    ),
                )
                return
            self.ctx.descriptors.waiting += 1
            if self._held.push(loop.time() + decision.delay_ms / 1000.0, (conn, peer, ip)):
                self._set_held_timer(loop)
        else:
            self._reject(conn, ip, decision)

    def _set_held_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._held_timer is not None:
            self._held_timer.cancel()
        due = self._held.next_due()
        self._held_timer = None if due is None else loop.call_at(due, self._held_due)

    def _held_due(self) -> None:
        """KIP-612: a connection from an IP over its rate waits (costing no broker connection), then is checked
        again: still over, it is closed; else it is served."""
        loop = asyncio.get_running_loop()
        self._held_timer = None
        ctx = self.ctx
        for conn, peer, ip in self._held.due(loop.time() + HELD_SLACK_S):
            ctx.descriptors.waiting -= 1
            decision = ctx.connection_quotas.retry(ctx.name, ip, ctx.clock.now_ms())
            if isinstance(decision, Admit):
                self._wait_for_setup(conn, peer, ip)
            else:
                self._reject(conn, ip, decision)
        self._set_held_timer(loop)

    # -- admitted connections: set up in turn by network and address (proxy.connection.setup_queue) --------------

    def _wait_for_setup(self, conn: socket.socket, peer: PeerAddress, ip: str) -> None:
        """An admitted (counted) connection waits for its turn; counted in the descriptors until it is set up."""
        self.ctx.descriptors.waiting += 1
        self._shed(self._waiting.push(ip, (conn, peer, ip)))
        self._set_up_next()

    def _make_room(self) -> bool:
        """Descriptors for a connection just accepted (the proxy's own reserve reached), made by closing the oldest
        of the longest setup queues (an eighth of them); False when nothing waits."""
        shed = self._waiting.make_room()
        self._shed(shed)
        return bool(shed)

    def _shed(self, shed: list[tuple[socket.socket, PeerAddress, str]]) -> None:
        detail = f"{len(self._waiting) + len(shed)} connections were waiting for their setup, the most from its network"
        for waiting in shed:
            self._close_waiting(waiting, Close(SETUP_QUEUE_FULL, detail))

    def _close_waiting(self, waiting: tuple[socket.socket, PeerAddress, str], decision: Close) -> None:
        """A connection closed before its setup: admitted, so counted until now."""
        conn, _, ip = waiting
        self.ctx.descriptors.waiting -= 1
        self.ctx.connection_quotas.closed(self.ctx.name, ip)
        self._reject(conn, ip, decision)

    def _set_up_next(self) -> None:
        """Start the next setups while fewer than SETUPS_AT_ONCE are under way (and SETUPS_PER_NETWORK of a
        network)."""
        loop = asyncio.get_running_loop()
        while len(self._setting_up) < SETUPS_AT_ONCE:
            taken = self._waiting.pop()
            if taken is None:
                return
            turn, waiting = taken
            self.ctx.descriptors.waiting -= 1
            task = loop.create_task(self._serve(*waiting))
            self.ctx.descriptors.track(task)
            self._setting_up[task] = (loop.call_later(SETUP_SLOT_S, self._slot_free, task), turn)
            task.add_done_callback(self._setup_ended)

    def _setup_ended(self, task: asyncio.Task[bool]) -> None:
        """A setup's task is over: its slot is free, unless its connection keeps it until the broker's first reply."""
        if task.cancelled() or task.exception() is not None or not task.result():
            self._slot_free(task)

    def _until_first_reply(self, client: ClientConnection) -> bool:
        """The setup's slot is held until the broker first answers this connection (or it ends), SETUP_SLOT_S at
        most: what one network's connections keep in flight at the broker before their first answers is bounded by
        SETUPS_PER_NETWORK, so a flood of connections each sending one request does not queue others' behind it at
        the broker. False when the setup has no slot (the listener closed) or no broker connection."""
        task = asyncio.current_task()
        if client.upstream is None or task not in self._setting_up:
            return False
        client.upstream.on_first_reply = lambda: self._slot_free(task)
        return True

    def _slot_free(self, task: asyncio.Task[Any]) -> None:
        """``task``'s connection has its first answer (or is closed), or its slot's time is up: the next may
        start."""
        slot = self._setting_up.pop(task, None)
        if slot is not None:
            end, turn = slot
            end.cancel()
            self._waiting.done(turn)
            self._set_up_next()

    def _reject(self, conn: socket.socket, ip: str, decision: Close) -> None:
        conn.close()
        ctx = self.ctx
        ctx.metrics.connections_closed.labels(ctx.name, decision.reason).inc()
        suppressed = REJECT_LOG.allow(ip, decision.reason, asyncio.get_running_loop().time())
        if suppressed is not None:
            log.info(
                "listener %s: closed a new connection: %s%s",
                ctx.name,
                decision.detail,
                f" ({suppressed} more like it in the last 10 s)" if suppressed else "",
                extra=log_fields(ctx, ip),
            )

    async def _serve(self, conn: socket.socket, peer: PeerAddress, ip: str) -> bool:
        """Give an admitted socket its broker connection, then start reading from it. On a TLS listener the
        handshake comes first, within ``listener.tls.handshake.timeout.ms``: a client that never completes it
        costs no broker connection. True when the setup's slot passes to the broker's first reply."""
        loop = asyncio.get_running_loop()
        claimed = await self._claim(conn, ip)
        if claimed is None:
            return False
        client = ClientConnection(self.ctx)
        client.accepted(peer, counted_ip=ip, claimed=claimed)
        ssl_context = self.ctx.ssl_context
        if ssl_context is None:
            if gone_unheard(conn):  # closed before its turn came, having sent nothing: no broker connection
                client.close("client_closed")
                conn.close()
                return False
            if not await client.connect_upstream():
                conn.close()
                return False
            held = self._until_first_reply(client)
            try:
                await loop.connect_accepted_socket(lambda: client, conn)
            except OSError as exc:
                log.info("listener %s: connection lost while being set up: %s", self.ctx.name, exc)
                client.close("client_closed")
                conn.close()
            return held
        timeout_s = self.ctx.tls_handshake_timeout_s
        try:
            # the client is not read until its broker connection is open (ClientConnection.connection_made)
            await loop.connect_accepted_socket(lambda: client, conn, ssl=ssl_context, ssl_handshake_timeout=timeout_s)
        except (TimeoutError, OSError) as exc:
            text = str(exc) or type(exc).__name__
            hint = (
                " (a plaintext client on a TLS listener?)"
                if "WRONG_VERSION_NUMBER" in text or "HTTP_REQUEST" in text or "record layer failure" in text
                else ""
            )
            if isinstance(exc, asyncio.TimeoutError):
                text = f"not completed within {timeout_s:g} s"
            suppressed = HANDSHAKE_LOG.allow(ip, "tls", loop.time())
            if suppressed is not None:
                log.warning(
                    "listener %s: TLS handshake with %s failed: %s%s%s",
                    self.ctx.name,
                    client.peer,
                    bounded(text),
                    hint,
                    f" ({suppressed} more from this IP in the last 10 s)" if suppressed else "",
                    extra=log_fields(self.ctx, client.peer),
                )
            client.close("tls_handshake_failed")
            conn.close()
            return False
        if client.closed:  # refused after the handshake (an unmapped certificate subject)
            return False
        # reading starts once it is open
        return await client.connect_upstream() and self._until_first_reply(client)

    async def _claim(self, conn: socket.socket, ip: str) -> bool | None:
        """Workers: a connection this worker's counts admitted, claimed from the parent's count of every worker's,
        so a count limit holds across workers exactly. True: claimed (released at its close); False: admitted
        unclaimed (no count limit, a single process, the parent slow to answer); None: refused there, closed."""
        ctx = self.ctx
        gate, quotas = ctx.open_gate, ctx.connection_quotas
        limits = quotas.count_limits(ctx.name, ip) if gate.shared else None
        if limits is None:
            return False
        try:
            outcome = await gate.claim(ctx.name, ip, limits)
        except asyncio.CancelledError:
            quotas.closed(ctx.name, ip)
            conn.close()
            raise
        if outcome in (CLAIMED, UNCLAIMED):
            return outcome == CLAIMED
        self._reject(conn, ip, quotas.refused_elsewhere(ctx.name, ip, outcome))
        return None

    async def close(self) -> None:
        """Stop accepting and close held connections; connections already served are left to the caller to drain."""
        await cancel_and_wait(self._task)
        if self._held_timer is not None:
            self._held_timer.cancel()
            self._held_timer = None
        for conn, _, ip in self._held.drain():
            self.ctx.descriptors.waiting -= 1
            self._reject(conn, ip, Close("shutdown", "the listener closed"))
        for end, turn in self._setting_up.values():
            end.cancel()
            self._waiting.done(turn)
        self._setting_up.clear()
        for waiting in self._waiting.drain():
            self._close_waiting(waiting, Close("shutdown", "the listener closed"))
        if self._sock is not None:
            self._sock.close()


def tune(conn: socket.socket, ctx: ListenerContext) -> None:
    """An accepted client socket: no Nagle delay, and the buffer sizes ``socket.send.buffer.bytes`` and
    ``socket.receive.buffer.bytes`` set (-1: the kernel's, which it grows with the traffic, the send buffer up to
    ``net.ipv4.tcp_wmem``'s maximum: 4 MiB per client that reads slowly, beside what the proxy holds itself under
    ``connections.max.buffered.response.bytes``)."""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ctx.send_buffer_bytes != -1:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, ctx.send_buffer_bytes)
    if ctx.receive_buffer_bytes != -1:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, ctx.receive_buffer_bytes)
