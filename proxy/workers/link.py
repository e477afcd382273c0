"""A worker's side of its link to the parent: every ``quota.workers.sync.ms`` it sends the usage its managers
recorded since the last sync (and its readiness when it changes); what the parent passes on from the other workers
is recorded as remote usage. The link's end (the parent gone) asks the worker to stop."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import Callable
from types import SimpleNamespace

from prometheus_client import Counter

from proxy.ground.quiet import quiet
from proxy.ground.tasks import cancel_and_wait
from proxy.observers.freezing import frozen_as_made
from proxy.ops.metrics import PREFIX
from proxy.workers.frames import (
    BEAT,
    BEAT_INTERVAL_S,
    CHARGE,
    CHARGED,
    CLAIM,
    CLAIMED,
    EAGER,
    GONE,
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
from quota.sharing import worker_seed
from quota.sharing.remote_usage import RECORD_STEP, record_remote_steps
from quota.sharing.usage_encoding import UsageDeltaError, decode, encode
from quota.sharing.usage_share import TopicTap, UsageTap, partition_tap

log = logging.getLogger(__name__)

VOLUME = "volume"  # the scope of the volume throttle's scaled producer_byte_rate (broker scopes are node ids)
REQUESTS, GROUPS = "requests", "groups"  # the scopes of request_rate per client entity, and per {group: ...}
MAX_UNSENT_BYTES = 16 * 2**20  # the parent not reading: deltas past this are dropped (counted), never buffered
DECODE_IN_THREAD_BYTES = 64 * 2**10  # a delta this long (a peer proxy's, thousands of entities) is decoded off the loop


def quiet_decode(payload: bytes):
    with quiet():
        return decode(payload)


class WorkerLink:
    def __init__(self, app, index: int, sock: socket.socket, sync_ms: int, on_lost: Callable[[], None]) -> None:
        self.app = app
        self.source = str(index)
        self._sock = sock
        self._sync_s = sync_ms / 1000.0
        self._on_lost = on_lost
        # the proxy's own quota set, its mutations, its connections and its topic quotas
        self.tap = UsageTap(self._wake, app.config.settings.quota_max_tracked_entities)
        self._min_gap_s = self._sync_s / 4  # eager syncs: at most this often
        self._last_sync = 0.0
        self._eager: asyncio.Handle | None = None
        self._tell_eager = app.config.settings.quota_cluster_topic is not None  # the parent publishes it early too
        quotas = app.quotas
        for manager in (quotas.produce, quotas.fetch, quotas.mutations, quotas.producer_ids, app.connection_quotas):
            manager.tap = self.tap
        self._taps: dict[str, UsageTap] = {}  # quota.scope broker in cluster mode: each broker's set, by node id
        if quotas.volume is not None:  # the volume-scaled producer_byte_rate, a manager of its own
            quotas.volume.produce.tap = self._taps[VOLUME] = UsageTap(self._wake)
        # the topic quotas: a topic's bytes as the usage of an anonymous client whose client id is the topic, told
        # beside the client usage (so the parent's record on a usage topic carries them too)
        quotas.topics.produce.tap = quotas.topics.fetch.tap = TopicTap(self.tap)
        # the partition quotas: a partition's bytes as the usage of the client (topic, partition), the same way
        quotas.topics.partition_produce.tap = quotas.topics.partition_fetch.tap = partition_tap(self.tap)
        # request_rate: a client entity's requests, and a group's (as an anonymous client whose client id is the group)
        quotas.requests.clients.tap = self._taps[REQUESTS] = UsageTap(self._wake)
        quotas.requests.groups.tap = self._taps[GROUPS] = UsageTap(self._wake)
        registry = app.metrics.registry
        self.deltas = Counter(
            f"{PREFIX}_worker_sync_deltas",
            "Usage deltas this worker sent to its peers "
            "(direction=sent), recorded from them (received), or dropped because the link was "
            "backed up (dropped).",
            ["direction"],
            registry=registry,
        )
        self.entities = Counter(
            f"{PREFIX}_worker_sync_entities",
            "Entities in the usage deltas this worker sent or received.",
            ["direction"],
            registry=registry,
        )
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: list[asyncio.Task] = []
        self._ready_sent: str | None = None
        self._seeded: dict[str, int] = {}  # entities of each kind taken from a peer's state so far (for the log)
        self._seed_in = asyncio.Event()  # a peer's state is in (or the parent said none serves)

    async def start(self) -> None:
        reader, self._writer = await asyncio.open_unix_connection(sock=self._sock)
        ops_port = self.app.ops_address[1] if self.app.ops_address else None
        self._writer.write(pack(HELLO, json.dumps({"pid": os.getpid(), "ops_port": ops_port}).encode()))
        self.app.open_gate.attach(self._to_parent)
        self.app.creation_claims.attach(self._charge)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._sync_loop()),
            loop.create_task(self._read_loop(reader)),
            loop.create_task(self._beat_loop()),
        ]

    def _wake(self) -> None:
        """An entity's unsent usage is large (quota.sharing.usage_share.EAGER_SHARE): sync soon, not at the interval."""
        if self._eager is not None or self._writer is None:
            return
        loop = asyncio.get_running_loop()
        self._eager = loop.call_at(max(loop.time(), self._last_sync + self._min_gap_s), self._eager_sync)

    def _eager_sync(self) -> None:
        self._eager = None
        self.sync()
        writer = self._writer
        if self._tell_eager and writer is not None and not writer.is_closing():
            writer.write(pack(EAGER, b""))

    def sync(self) -> None:
        """Send what was recorded since the last sync, and the readiness if it changed."""
        self._last_sync = asyncio.get_running_loop().time()
        writer = self._writer
        if writer is None or writer.is_closing():
            return
        self._tap_broker_sets()
        deltas = [self.tap.take(self.source)] + [tap.take(self.source, scope) for scope, tap in self._taps.items()]
        for delta in deltas:
            if delta.empty:
                continue
            if writer.transport.get_write_buffer_size() > MAX_UNSENT_BYTES:
                self.deltas.labels("dropped").inc()
            else:
                writer.write(pack(USAGE, encode(delta)))
                self.deltas.labels("sent").inc()
                self.entities.labels("sent").inc(delta.entities)
        reason = self.app.not_ready() or ""
        if reason != self._ready_sent:
            writer.write(pack(READY, reason.encode()))
            self._ready_sent = reason

    def _tap_broker_sets(self) -> None:
        """Give every broker's quota set made since the last look its own tap (usage it counted before that, at
        most one sync interval's at its first connection, is not shared)."""
        for label, quota_set in self.app.quotas.quota_sets()[1:]:
            tap = self._taps.get(label)
            if tap is None:
                tap = self._taps[label] = UsageTap(self._wake)
            if quota_set.produce.tap is not tap:
                quota_set.produce.tap = quota_set.fetch.tap = quota_set.producer_ids.tap = tap

    def _managers_for(self, scope: str):
        """The quota set a peer's delta of ``scope`` goes into: the proxy's own, or that broker's (made now if this
        worker has not served the broker yet, so its budget starts with the peers' usage)."""
        quotas = self.app.quotas
        if not scope:
            return quotas
        if scope == VOLUME:
            volume = quotas.volume
            return (
                None
                if volume is None
                else SimpleNamespace(produce=volume.produce, fetch=quotas.fetch, producer_ids=quotas.producer_ids)
            )
        if scope in (REQUESTS, GROUPS):  # request rates alone (their manager: _request_rates)
            return quotas
        try:
            node_id = int(scope)
        except ValueError:
            return None
        scoped = quotas.for_broker(node_id)
        self._tap_broker_sets()
        return scoped

    def _request_rates(self, scope: str):
        """The request-rate manager a peer's delta of ``scope`` carries requests for (None: it carries none)."""
        requests = self.app.quotas.requests
        return requests.clients if scope == REQUESTS else requests.groups if scope == GROUPS else None

    async def _sync_loop(self) -> None:
        while True:
            self.sync()
            await asyncio.sleep(self._sync_s)

    def _to_parent(self, what: bytes, payload: bytes) -> None:
        """The open gate's claims and releases (proxy.connection.open_gate), framed."""
        writer = self._writer
        if writer is not None and not writer.is_closing():
            writer.write(pack(CLAIM if what == b"claim" else RELEASE, payload))

    def _charge(self, payload: bytes) -> None:
        """A created topic's claim (proxy.cluster.creation_claims), framed."""
        writer = self._writer
        if writer is not None and not writer.is_closing():
            writer.write(pack(CHARGE, payload))

    def _send_seed(self, to: bytes) -> None:
        """A worker (re)started: its quota state starts from this one's, which holds every worker's usage (the one
        that exited included), so it does not admit a tenant afresh (:mod:`quota.sharing.worker_seed`). Sent in parts
        by a task, the loop serving this worker's clients between two (the whole may take a second at 10^5 entities)."""
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.get_running_loop().create_task(self._send_seed_parts(to)))

    async def _send_seed_parts(self, to: bytes) -> None:
        app = self.app
        quotas = app.quotas
        for part in worker_seed.parts(
            quotas.produce,
            quotas.fetch,
            quotas.mutations,
            quotas.producer_ids,
            app.connection_quotas,
            quotas.clock.now_ms,
            topics=quotas.topics,
            requests=quotas.requests,
        ):
            writer = self._writer
            if writer is None or writer.is_closing():
                return
            writer.write(pack(SEED, to + b"\n" + json.dumps(part).encode()))  # to whom: read by the parent alone
            await asyncio.sleep(0)

    def _take_seed(self, payload: bytes) -> None:
        """One part of a peer's state: taken in at once (a part is small); logged once the last is in."""
        app = self.app
        quotas = app.quotas
        try:
            seed = json.loads(payload.split(b"\n", 1)[1])
            taken = worker_seed.install(
                seed,
                quotas.produce,
                quotas.fetch,
                quotas.mutations,
                quotas.producer_ids,
                app.connection_quotas,
                quotas.clock.now_ms(),
                topics=quotas.topics,
                requests=quotas.requests,
            )
        except (ValueError, IndexError) as exc:  # JSON, SeedError, no destination: a peer's bug; keep serving
            log.warning("worker %s: a peer's quota state not taken: %s", self.source, exc)
            return
        for kind, n in taken.items():
            self._seeded[kind] = self._seeded.get(kind, 0) + n
        if seed.get("last"):
            self._seed_in.set()
            if any(self._seeded.values()):
                log.info(
                    "worker %s: quota state taken from a peer: %s",
                    self.source,
                    ", ".join(f"{n} {kind}" for kind, n in self._seeded.items()),
                )

    async def seeded(self, timeout_s: float) -> bool:
        """Wait for a peer's quota state (its last part), at most ``timeout_s``; False if it did not come."""
        try:
            await asyncio.wait_for(self._seed_in.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _beat_loop(self) -> None:
        """The parent's proof that this worker's loop runs: one frame every BEAT_INTERVAL_S (a stopped or stuck
        worker sends none, and is restarted)."""
        while True:
            writer = self._writer
            if writer is not None and not writer.is_closing():
                writer.write(pack(BEAT, b""))
            await asyncio.sleep(BEAT_INTERVAL_S)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        app = self.app
        quotas = app.quotas
        try:
            while (frame := await read_frame(reader)) is not None:
                kind, payload = frame
                if kind == GONE:
                    app.connection_quotas.peers.forget(payload.decode(errors="replace"))
                    continue
                if kind == CLAIMED:
                    app.open_gate.answered(payload)
                    continue
                if kind == CHARGED:
                    app.creation_claims.answered(payload)
                    continue
                if kind == SEED_ASK:
                    self._send_seed(payload)
                    continue
                if kind == SEED:
                    self._take_seed(payload)
                    continue
                if kind == RESEND:
                    self.tap.open(app.connection_quotas.open_snapshot())
                    continue
                if kind != USAGE:
                    continue
                try:
                    if len(payload) < DECODE_IN_THREAD_BYTES:
                        delta = decode(payload)
                    else:
                        delta = await asyncio.to_thread(quiet_decode, payload)
                except UsageDeltaError as exc:
                    log.warning("worker %s: a peer's usage delta dropped: %s", self.source, exc)
                    continue
                scoped = self._managers_for(delta.scope)
                if scoped is None:
                    log.warning(
                        "worker %s: a peer's usage delta for unknown scope %r dropped", self.source, delta.scope
                    )
                    continue
                # a large delta (a peer proxy's record: 10^5 entities take seconds) a step at a time, the worker's
                # clients served in between
                large = delta.entities > RECORD_STEP
                steps = record_remote_steps(
                    delta,
                    quotas.clock.now_ms,
                    produce=scoped.produce,
                    fetch=scoped.fetch,
                    mutations=quotas.mutations,
                    producer_ids=scoped.producer_ids,
                    connections=app.connection_quotas,
                    requests=self._request_rates(delta.scope),
                    topics=None if delta.scope else quotas.topics,  # a topic's usage: in the proxy's own delta
                    step=RECORD_STEP if large else None,
                )
                if large:  # the sensors it makes (tenants new to this worker) out of the collector's sight
                    steps = frozen_as_made(steps, lambda: len(scoped.produce) + len(scoped.fetch))
                for _ in steps:
                    if large:
                        await asyncio.sleep(0)
                self.deltas.labels("received").inc()
                self.entities.labels("received").inc(delta.entities)
        except (FrameError, ConnectionError) as exc:
            log.error("worker %s: link to the parent broken: %s", self.source, exc)
        log.warning("worker %s: the parent is gone: stopping", self.source)
        app.open_gate.lost()
        app.creation_claims.lost()
        self._on_lost()

    async def close(self) -> None:
        if self._eager is not None:
            self._eager.cancel()
            self._eager = None
        self.sync()  # the last usage, so peers still serving see it
        for task in self._tasks:
            await cancel_and_wait(task)
        if self._writer is not None:
            self._writer.close()
