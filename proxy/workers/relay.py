"""The parent's side of the workers' links: every frame a worker sends read and acted on. Usage deltas are passed on
to the other workers (and to the usage topic's publisher), connection claims answered from the one ledger of open
connections, a created topic's charge given to the first worker to claim it, a newcomer's seed of quota state asked of a serving worker and passed to it.

A worker whose link is backed up past :data:`MAX_FORWARD_BUFFER` has the deltas dropped for it, counted
(``worker_deltas_forwarded_total{outcome="dropped"}``); the parent never waits for a worker."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from prometheus_client import Counter

from proxy.workers.frames import (
    CHARGE,
    CHARGED,
    CLAIM,
    CLAIMED,
    EAGER,
    HELLO,
    READY,
    RELEASE,
    RESEND,
    SEED,
    SEED_ASK,
    USAGE,
    FrameError,
    pack,
    read_frame,
)
from proxy.workers.slot import Slot
from quota.sharing.first_claims import FirstClaims
from quota.sharing.open_ledger import OpenLedger

log = logging.getLogger(__name__)

MAX_FORWARD_BUFFER = 16 * 2**20  # a worker not reading its link: deltas past this are dropped for it, counted


class Relay:
    """``on_usage``: a worker's usage delta, for the usage topic (quota.cluster.topic); ``on_eager``: a worker asks
    for an early sync of it; ``monotonic``: when a frame was heard (the heartbeat watch reads it); ``stopping``:
    whether the parent is stopping (a broken link is expected then)."""

    def __init__(
        self,
        slots: list[Slot],
        forwarded: Counter,
        on_usage: Callable[[bytes], None],
        on_eager: Callable[[], None],
        monotonic: Callable[[], float],
        stopping: Callable[[], bool],
    ) -> None:
        self.slots = slots
        self.forwarded = forwarded
        self.ledger = OpenLedger()  # every worker's open connections under a count limit, claimed one by one
        self.charged = FirstClaims()  # topics a worker saw created: the first to claim one charges it
        self._on_usage = on_usage
        self._on_eager = on_eager
        self._monotonic = monotonic
        self._stopping = stopping

    async def read(self, slot: Slot, reader: asyncio.StreamReader) -> None:
        """Reads ``slot``'s link until it ends (the worker exited, or its link broke)."""
        try:
            while (frame := await read_frame(reader)) is not None:
                kind, payload = frame
                slot.last_heard = self._monotonic()
                if kind == USAGE:
                    self.forward(slot, pack(USAGE, payload))
                    self._on_usage(payload)
                elif kind == CLAIM:
                    claim_id, listener, ip, ip_max, listener_max, total_max = json.loads(payload)
                    refused = self.ledger.claim(str(slot.index), listener, ip, ip_max, listener_max, total_max)
                    self._write(slot, pack(CLAIMED, json.dumps([claim_id, refused]).encode()))
                elif kind == CHARGE:
                    claim_id, topic, ttl_ms = json.loads(payload)
                    first = self.charged.claim(topic, int(self._monotonic() * 1000), ttl_ms)
                    self._write(slot, pack(CHARGED, json.dumps([claim_id, first]).encode()))
                elif kind == RELEASE:
                    listener, ip = json.loads(payload)
                    self.ledger.release(str(slot.index), listener, ip)
                elif kind == EAGER:
                    self._on_eager()
                elif kind == READY:
                    slot.not_ready = payload.decode(errors="replace")
                elif kind == HELLO:
                    hello = json.loads(payload)
                    slot.ops_port = hello.get("ops_port")
                    slot.hello = slot.started_once = True
                    log.info("worker %d serving (pid %s)", slot.index, hello.get("pid"))
                    self.forward(slot, pack(RESEND, b""), counted=False)  # the others' open counts, for the newcomer
                    self._ask_seed(slot)
                elif kind == SEED:
                    self._pass_seed(payload)
        except (FrameError, ConnectionError, ValueError) as exc:
            if not self._stopping():
                log.error("worker %d: link broken: %s", slot.index, exc)

    @staticmethod
    def _open(slot: Slot) -> asyncio.StreamWriter | None:
        """``slot``'s link when it can be written to."""
        writer = slot.writer
        return None if writer is None or writer.is_closing() else writer

    def _write(self, slot: Slot, frame: bytes) -> None:
        writer = self._open(slot)
        if writer is not None:
            writer.write(frame)

    def _ask_seed(self, newcomer: Slot) -> None:
        """One serving worker (each holds every worker's usage) is asked to send the newcomer its rates; with none
        serving, the newcomer is told so (an empty last part), and accepts at once."""
        for slot in self.slots:
            writer = self._open(slot)
            if slot is not newcomer and slot.hello and writer is not None:
                writer.write(pack(SEED_ASK, str(newcomer.index).encode()))
                return
        self._write(newcomer, pack(SEED, f"{newcomer.index}\n".encode() + b'{"last": true}'))

    def _pass_seed(self, payload: bytes) -> None:
        try:
            to = int(payload.split(b"\n", 1)[0])
        except ValueError:
            log.warning("a worker's seed without a valid destination dropped")
            return
        slot = self.slots[to] if 0 <= to < len(self.slots) else None
        if slot is not None and slot.hello:
            self._write(slot, pack(SEED, payload))

    def forward(self, source: Slot | None, frame: bytes, counted: bool = True) -> None:
        """``frame`` to every serving worker but ``source``; ``counted``: a worker's usage delta (the parent's own
        frames are not)."""
        for slot in self.slots:
            writer = self._open(slot)
            if slot is source or writer is None or not slot.hello:
                continue
            outcome = "forwarded"
            if writer.transport.get_write_buffer_size() > MAX_FORWARD_BUFFER:
                outcome = "dropped"
            else:
                try:
                    writer.write(frame)
                except ConnectionError:  # that worker is exiting: its own supervision sees to it
                    outcome = "dropped"
            if counted:
                self.forwarded.labels(outcome).inc()
