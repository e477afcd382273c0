"""What a client connection is counted in, each count undone once when it closes: the listener's open connections
(the set drained at shutdown, ``active_connections``), the connection quotas' count for its IP (``max.connections``
and the per-IP limits), under ``workers: N`` its claim on the parent's count (:mod:`proxy.connection.open_gate`), why
it closed (``connections_closed``) and the time it spent at the in-flight bound (``inflight_bound_reached``,
``inflight_bound_seconds``).
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.connection.client_context import ListenerContext


class Counted:
    __slots__ = ("_ctx", "_ip", "_claimed", "at_bound_since", "_bound")

    def __init__(self, ctx: ListenerContext) -> None:
        self._ctx = ctx
        self._bound = ctx.metrics.inflight_bound(ctx.name)  # the listener's counts, added to at each change
        self._ip: str | None = None  # the IP the connection is counted under in the connection quotas
        self._claimed = False  # claimed from the parent's count (workers): released at the close
        self.at_bound_since: float | None = None  # since when (loop time) it is at the in-flight bound

    def opened(self, conn: object, counted_ip: str | None, claimed: bool) -> None:
        """Admitted: counted as open (once, before it has a broker connection)."""
        ctx = self._ctx
        self._ip = counted_ip
        self._claimed = claimed and counted_ip is not None
        ctx.metrics.active_connections.labels(ctx.name).inc()
        ctx.connections.add(conn)

    def follow_bound(self, at_bound: bool, clock: Callable[[], float]) -> None:
        """Whether the connection is at its in-flight bound now: counted when that changed (``clock``: the loop's)."""
        if at_bound != (self.at_bound_since is not None):
            self.bound_changed(clock())

    def bound_changed(self, now: float) -> None:
        """The connection reached the in-flight bound, or left it (``now``: the loop's time). The C shell does this
        function's work inline where it is built (``counted_bound_changed`` in native/shell.c): change both."""
        bound = self._bound
        if self.at_bound_since is None:
            self.at_bound_since = now
            bound.reached += 1
        else:
            bound.seconds += now - self.at_bound_since
            self.at_bound_since = None

    def closed(self, conn: object, reason: str, now: float) -> None:
        """Closed for ``reason``: every count undone (``now``: the loop's time)."""
        ctx = self._ctx
        ctx.connections.discard(conn)
        if self._ip is not None:
            ctx.connection_quotas.closed(ctx.name, self._ip)
            if self._claimed:
                ctx.open_gate.release(ctx.name, self._ip)
            self._ip = None
        ctx.metrics.active_connections.labels(ctx.name).dec()
        ctx.metrics.connections_closed.labels(ctx.name, reason).inc()
        if self.at_bound_since is not None:
            self.bound_changed(now)
