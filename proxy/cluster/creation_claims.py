"""A worker's side of the parent's first claims (:class:`quota.sharing.first_claims.FirstClaims`): whether this
worker charges a topic it saw created, or another worker already did (``workers: N``).

A worker asks once it has learnt the topic's count (:mod:`proxy.apis.streams_topics`); the parent answers the first
claim of a name True and every other within its time False. A single process (nothing attached) charges at once. A
claim the parent has not answered within :data:`CLAIM_TIMEOUT_S`, or one waiting when the link is lost, is charged:
the worst case is the topic charged by each worker, never not at all."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

CLAIM_TIMEOUT_S = 1.0
MAX_WAITING = 10_000  # claims unanswered at once; past it a claim is charged at once (memory stays bounded)

Then = Callable[[bool], None]  # True: this worker charges the topic


class CreationClaims:
    def __init__(self) -> None:
        self._send: Callable[[bytes], None] | None = None
        self._waiting: dict[int, tuple[Then, asyncio.TimerHandle]] = {}
        self._next = 0
        self.timeouts = 0

    def attach(self, send: Callable[[bytes], None]) -> None:
        """``send(payload)``: a claim to the parent (proxy.workers.link frames it as CHARGE)."""
        self._send = send

    def claim(self, name: str, ttl_ms: int, then: Then) -> None:
        """``then(True)`` when this worker is the first to claim ``name`` (or nobody else is asked), ``then(False)``
        when another worker claimed it within ``ttl_ms``."""
        send = self._send
        if send is None or len(self._waiting) >= MAX_WAITING:
            then(True)
            return
        self._next += 1
        claim_id = self._next
        ends = asyncio.get_running_loop().call_later(CLAIM_TIMEOUT_S, self._timed_out, claim_id)
        self._waiting[claim_id] = (then, ends)
        send(json.dumps([claim_id, name, ttl_ms]).encode())

    def answered(self, payload: bytes) -> None:
        """The parent's CHARGED frame: ``[id, first]``."""
        claim_id, first = json.loads(payload)
        waiting = self._waiting.pop(claim_id, None)
        if waiting is not None:
            then, ends = waiting
            ends.cancel()
            then(bool(first))

    def _timed_out(self, claim_id: int) -> None:
        waiting = self._waiting.pop(claim_id, None)
        if waiting is not None:
            self.timeouts += 1
            log.warning("the parent did not answer a created topic's claim within %g s: charged here", CLAIM_TIMEOUT_S)
            waiting[0](True)

    def lost(self) -> None:
        """The link is gone (the worker is stopping): claims waiting are charged here."""
        self._send = None
        waiting, self._waiting = self._waiting, {}
        for then, ends in waiting.values():
            ends.cancel()
            then(True)


ALONE = CreationClaims()  # never attached: every claim is this process's own
