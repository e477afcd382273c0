"""A worker's side of the open-connection counts kept by its parent (:class:`quota.sharing.open_ledger.OpenLedger`):
with ``workers: N``, a connection the worker's own counts admit under a count limit (``max.connections``, the
listener's, ``max.connections.per.ip``) is claimed from the parent before it is served, and released when it
closes, so the limit holds across workers exactly, however the kernel spreads the connections. A single process
(nothing attached) admits at once. A claim the parent has not answered within :data:`CLAIM_TIMEOUT_S` is admitted
(the worker's own check, against the others' last synced counts, already passed), so a busy parent never holds
clients for long."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

CLAIM_TIMEOUT_S = 1.0
CLAIMED = "claimed"  # counted by the parent: released when the connection closes
UNCLAIMED = "unclaimed"  # admitted without the parent's count (a single process, or no answer in time)
MAX_ABANDONED = 10_000  # claims given up on, remembered so a late admission is released at once


_LINK_LOST = "link lost"


class OpenGate:
    def __init__(self) -> None:
        self._send: Callable[[bytes, bytes], None] | None = None
        self._waiting: dict[int, asyncio.Future[str | None]] = {}
        self._next = 0
        self._abandoned: dict[int, tuple[str, str]] = {}  # claim id -> (listener, ip), given up on (timeout)
        self.timeouts = 0

    def attach(self, send: Callable[[bytes, bytes], None]) -> None:
        """``send(what, payload)``: a claim (``what`` b"claim") or release (b"release") to the parent
        (proxy.workers.link frames them as CLAIM and RELEASE)."""
        self._send = send

    @property
    def shared(self) -> bool:
        return self._send is not None

    async def claim(self, listener: str, ip: str, limits: tuple[int | None, int | None, int | None]) -> str:
        """CLAIMED, UNCLAIMED, or the kind of limit the connection would pass (quota.primitives.peer_connections' IP,
        LISTENER, TOTAL): refused."""
        send = self._send
        if send is None:
            return UNCLAIMED
        self._next += 1
        claim_id = self._next
        future = self._waiting[claim_id] = asyncio.get_running_loop().create_future()
        ip_max, listener_max, total_max = limits
        send(b"claim", json.dumps([claim_id, listener, ip, ip_max, listener_max, total_max]).encode())
        try:
            refused = await asyncio.wait_for(future, CLAIM_TIMEOUT_S)
        except TimeoutError:
            self.timeouts += 1
            if len(self._abandoned) >= MAX_ABANDONED:
                del self._abandoned[next(iter(self._abandoned))]
            self._abandoned[claim_id] = (listener, ip)
            log.warning(
                "the parent did not answer a connection claim within %g s: admitted on this worker's count",
                CLAIM_TIMEOUT_S,
            )
            return UNCLAIMED
        finally:
            self._waiting.pop(claim_id, None)
        if refused is None:
            return CLAIMED
        return UNCLAIMED if refused == _LINK_LOST else refused

    def answered(self, payload: bytes) -> None:
        """The parent's CLAIMED frame: ``[id, kind or null]``."""
        claim_id, refused = json.loads(payload)
        future = self._waiting.get(claim_id)
        if future is not None and not future.done():
            future.set_result(refused)
        elif (late := self._abandoned.pop(claim_id, None)) is not None and refused is None:
            self.release(*late)  # admitted unclaimed meanwhile: the parent's count must not keep it

    def release(self, listener: str, ip: str) -> None:
        if self._send is not None:
            self._send(b"release", json.dumps([listener, ip]).encode())

    def lost(self) -> None:
        """The link is gone (the worker is stopping): claims waiting are admitted, unclaimed."""
        self._send = None
        for future in self._waiting.values():
            if not future.done():
                future.set_result(_LINK_LOST)
