"""``quota.scope: cluster`` on sidecars (issue 26): one budget per tenant across the sidecars sharing
``quota.cluster.topic``.

Every ``quota.cluster.sync.ms`` the sidecar makes ONE record for the compacted usage topic, keyed by its id, whose
value is the :class:`~quota.sharing.usage_delta.UsageDelta` of what its own clients used since its last sync (the entities
with a quota and usage since then only; the same encoding the workers exchange), numbered (a random incarnation per
start, then 1, 2, ...) and dated with the wall clock when made; an empty delta is still published, as the sidecar's
sign of life. Records are sent in order, each until acknowledged (:mod:`quota.sharing.usage_outbox`: a failed send is sent
again at the next sync, not lost). It follows the topic from the beginning with its own consumer (no group) and
records every other sidecar's fresh delta as remote usage in its managers, once per record however often it is
read (:mod:`quota.sharing.remote_usage`), so its clients' next decisions see the tenant's total. Which records count, when a
peer goes stale or is forgotten and the share kept while none is fresh are :mod:`quota.sharing.cluster_peers`; while no
peer is fresh, this sidecar records its own usage times the silent peers as theirs (quota / live sidecars), says so
in a log line and on /readyz (still 200: it serves), and ``cluster_usage_fallback`` is 1.

Shared: ``producer_byte_rate``, ``consumer_byte_rate``, ``producer_ids_rate`` (tokens and ids) and
``controller_mutation_rate``, and the topic quotas' ``producer_byte_rate`` and ``consumer_byte_rate`` (one budget per
topic wherever its leaders are, issue 47). Not shared: connection limits (per proxy, as Kafka keeps them per broker) and the
volume throttle's scaled rate.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterator

from proxy.cluster.kafka_clients import OwnKafka, start_client, stop_client
from proxy.ground.clock import WallClock
from proxy.ground.identity import proxy_id
from proxy.ground.quiet import quiet
from proxy.ground.tasks import cancel_all, wait_for
from proxy.observers.cluster_usage_metrics import ClusterUsageMetrics
from proxy.observers.following import CALL_TIMEOUT_S
from proxy.observers.freezing import dispose, frozen_as_made
from proxy.observers.usage_follower import CLIENT_ID, REQUEST_OVERHEAD_BYTES, UsageFollower
from quota.sharing.cluster_peers import ClusterPeers, fallback_delta
from quota.sharing.remote_usage import record_remote_steps
from quota.sharing.topic_share import TopicShare
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_gathered import Leftover
from quota.sharing.usage_outbox import Outgoing, UsageOutbox
from quota.sharing.usage_record import Fitted, fit
from quota.sharing.usage_share import TopicTap, UsageTap, partition_tap

log = logging.getLogger("kafka_quota_proxy.cluster_usage")

LEAVE_TIMEOUT_S = 1.0
CLUSTER_LOOK_S = 60.0  # how often the brokers are counted: peers known are bounded by them (ClusterPeers.cluster_has)


class ClusterUsage:
    """The publisher of one proxy's record on the usage topic, and the owner of its :attr:`follower`
    (:mod:`proxy.observers.usage_follower`). ``own.gather(own_id)`` is what this
    proxy's clients used since the last sync (a :class:`~quota.sharing.usage_share.UsageTap` in one process; the sum of the
    workers' deltas in the parent of ``workers: N``, :mod:`proxy.workers.cluster_relay`); ``record(delta)`` records a
    peer's usage (its connection counts taken out) where this proxy's decisions see it, all at once or, when it
    returns an iterator, a step at a time (:func:`quota.sharing.remote_usage.record_remote_steps`); ``wall`` dates records
    (they cross hosts). :meth:`for_app` wires it into one process."""

    def __init__(
        self,
        settings,
        kafka: OwnKafka,
        registry,
        own_id: str,
        own,
        record: Callable[[UsageDelta], Iterator | None],
        wall=None,
    ) -> None:
        self.kafka = kafka
        self.topic: str = settings.quota_cluster_topic
        self.sync_s = settings.quota_cluster_sync_ms / 1000.0
        self.max_bytes: int = settings.quota_cluster_record_max_bytes
        self._per_entry: float | None = None  # the last record's compressed bytes per entity: the next one's guess
        self._leftover = (
            Leftover()
        )  # what the last record did not send: the next one adds it (quota.sharing.usage_record)
        self.carrying = False  # the last record left entities out (they wait for the next)
        self.wall = wall or WallClock()
        self.own_id = own_id
        self.peers = ClusterPeers(
            self.own_id,
            settings.quota_cluster_stale_ms,  # history before its start:
            since_ms=self.wall.now_ms() - settings.quota_cluster_sync_ms,  # not recorded
            forget_ms=settings.quota_cluster_forget_ms,
        )
        self.incarnation = secrets.token_hex(8)  # this run's records: followers apply each (incarnation, seq) once
        self.outbox = UsageOutbox(settings.quota_cluster_stale_ms, self.max_bytes)
        self._expired = 0  # outbox.expired already counted
        self.own = own
        self._woken = asyncio.Event()  # an entity's unsent usage is large: sync early (at most every quarter interval)
        self._topic_missing = False  # the follower found no topic: the publisher creates it at its next sync
        self.fallback = False
        self.note: str | None = None  # what /readyz adds while in fallback (read from the scrape thread: one reference)
        metrics = ClusterUsageMetrics(registry)
        self.records, self.peers_gauge, self.carried = metrics.records, metrics.peers, metrics.carried
        self.record_bytes, self.fallback_gauge = metrics.record_bytes, metrics.fallback
        self.topics_shared = metrics.topics_shared
        self.topic_share = TopicShare()  # whether the records carry topic usage (every live peer reads it)
        self.follower = UsageFollower(
            self.topic, kafka, self.sync_s, self.max_bytes, self.peers, self.records, self.wall, record, self._missing
        )
        self._producer = None
        self._tasks: list[asyncio.Task] = []

    @classmethod
    def for_app(cls, app, wall=None) -> ClusterUsage:
        """One proxy process: its managers tell the publisher what they record, peers' usage goes into them."""
        settings = app.config.settings
        quotas = app.quotas

        def record(delta: UsageDelta) -> Iterator:
            return frozen_as_made(
                record_remote_steps(
                    delta,
                    quotas.clock.now_ms,
                    produce=quotas.produce,
                    fetch=quotas.fetch,
                    mutations=quotas.mutations,
                    producer_ids=quotas.producer_ids,
                    connections=app.connection_quotas,
                    topics=quotas.topics,
                ),
                lambda: len(quotas.produce) + len(quotas.fetch) + len(quotas.topics.produce) + len(quotas.topics.fetch),
            )

        own_id = proxy_id(settings, (address[1] for address in app.listener_addresses.values()))
        usage = cls(settings, app.usage_kafka or app.kafka, app.metrics.registry, own_id, None, record, wall)
        usage.own = tap = UsageTap(usage.wake, settings.quota_max_tracked_entities)
        for manager in (quotas.produce, quotas.fetch, quotas.mutations, quotas.producer_ids):
            manager.tap = tap
        quotas.topics.produce.tap = quotas.topics.fetch.tap = TopicTap(tap)  # a topic's usage beside its clients'
        quotas.topics.partition_produce.tap = quotas.topics.partition_fetch.tap = partition_tap(tap)
        return usage

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._publish_loop()), loop.create_task(self.follower.follow())]
        log.info(
            "cluster usage: sidecar %s publishing to and following %s every %.0f ms",
            self.own_id,
            self.topic,
            self.sync_s * 1000,
        )

    # -- publishing ------------------------------------------------------------------------------------------------

    def wake(self) -> None:
        """One entity's unsent usage passed quota.sharing.usage_share.EAGER_SHARE of its quota per second: sync early."""
        self._woken.set()

    def take(self) -> Fitted:
        """This sync's record (what :meth:`_sync` does, on the loop: tests call it)."""
        gathered = self._gathered()
        numbered = (self.incarnation, self.outbox.next_seq())
        return self.settle(fit(gathered, self.max_bytes, self._per_entry, self._leftover, numbered))

    def _gathered(self):
        """This sync's usage; its topics' left out while a live peer does not read them (logged when that starts
        and stops: :mod:`quota.sharing.topic_share`)."""
        gathered = self.own.gather(self.own_id)
        self._leftover, note = self.topic_share.settle(gathered, self._leftover, self.peers, self.wall.now_ms())
        self.topics_shared.set(1 if self.topic_share.shared else 0)
        if note is not None:
            log.warning("cluster usage: %s", note)
        return gathered

    async def _sync(self) -> Fitted:
        """This sync's record, encoded and compressed in a thread (10^5 entities take a few hundred ms), quietly (the
        garbage collector paused: a full collection set off by the encoding's objects walks every object with the GIL
        held, 0.2-0.4 s at 10^5 tenants; resuming it costs one collection of what the sync left, measured smaller)."""
        gathered = [self._gathered()]
        leftover, self._leftover = self._leftover, Leftover()
        numbered = (self.incarnation, self.outbox.next_seq())

        def fitted() -> Fitted:
            with quiet():
                done = fit(gathered[0], self.max_bytes, self._per_entry, leftover, numbered)
                dispose(gathered.pop().values, leftover)  # here, not on the loop
                return done

        return self.settle(await asyncio.to_thread(fitted))

    def settle(self, fitted: Fitted) -> Fitted:
        """The record waits to be sent (:attr:`outbox`); what did not fit kept for the next sync (counted, logged
        when it starts and stops), and the look at the peers: in fallback the record's usage is also recorded as that
        of the silent peers."""
        self.outbox.add(fitted.delta.seq, fitted.data, self.wall.now_ms())
        self._leftover = fitted.leftover
        self._per_entry = fitted.bytes_per_entry or self._per_entry
        self.record_bytes.labels("bytes").set(len(fitted.data))
        self.record_bytes.labels("entities").set(fitted.sent)
        if fitted.carried:
            self.carried.inc(fitted.carried)
        if bool(fitted.carried) != self.carrying:
            self.carrying = bool(fitted.carried)
            if self.carrying:
                log.warning(
                    "cluster usage: %d of %d entities do not fit in one usage record of at most %d bytes "
                    "(quota.cluster.record.max.bytes): sending those using the most of their quota first, "
                    "the others at the next syncs",
                    fitted.carried,
                    fitted.entities,
                    self.max_bytes,
                )
            else:
                log.warning("cluster usage: every entity fits in one usage record again (%d bytes)", len(fitted.data))
        delta = fitted.delta
        gone = self.peers.forget_silent(self.wall.now_ms())
        if gone:
            log.warning(
                "cluster usage: forgetting %d sidecar(s) silent for %d ms while the topic went on (no longer "
                "among the live sidecars): %s",
                len(gone),
                self.peers.forget_ms,
                ", ".join(gone[:20]),
            )
        view = self.peers.view(self.wall.now_ms())
        self.peers_gauge.labels("known").set(view.known)
        self.peers_gauge.labels("fresh").set(view.fresh)
        if view.fallback != self.fallback:
            self.fallback = view.fallback
            self.fallback_gauge.set(1 if view.fallback else 0)
            self.note = (
                f"quota.scope cluster: no peer sidecar fresh, keeping to quota / {view.share_divisor}"
                if view.fallback
                else None
            )
            if view.fallback:
                log.warning(
                    "cluster usage: no peer sidecar has published for %d ms (stale: %s): keeping to this "
                    "sidecar's share, quota / %d",
                    self.peers.stale_ms,
                    ", ".join(self.peers.stale_peers(self.wall.now_ms())),
                    view.share_divisor,
                )
            else:
                log.warning("cluster usage: %d peer sidecar(s) fresh again: one budget across the cluster", view.fresh)
        if view.fallback:  # the silent peers' usage assumed up to now: their records of it, read later, are not
            unseen = self.peers.cover(self.wall.now_ms())  # recorded over it
            if not delta.empty:
                for _ in self.follower.record(fallback_delta(delta, unseen)):
                    pass
        return fitted

    async def _publish_loop(self) -> None:
        from aiokafka import AIOKafkaProducer

        key = self.own_id.encode()
        loop = asyncio.get_running_loop()
        last_sync = loop.time()
        looked = -CLUSTER_LOOK_S
        while True:
            try:
                await wait_for(self._woken.wait(), max(0.0, last_sync + self.sync_s - loop.time()))
                await asyncio.sleep(max(0.0, last_sync + self.sync_s / 4 - loop.time()))
            except TimeoutError:
                pass
            last_sync = loop.time()
            self._woken.clear()
            try:
                await self._sync()
                if loop.time() - looked >= CLUSTER_LOOK_S:
                    look = await self.kafka.look([], CALL_TIMEOUT_S, CLIENT_ID)
                    if look is not None and look.brokers:
                        looked = loop.time()
                        self.peers.cluster_has(len(look.brokers))
                if self._producer is None or self._topic_missing:  # also deleted under a live producer, which a
                    await self.kafka.ensure_topic(self.topic, CLIENT_ID)  # broker may answer NONE all the same
                    self._topic_missing = False
                if self._producer is None:
                    producer = AIOKafkaProducer(
                        **self.kafka.options(CLIENT_ID),
                        acks=1,
                        linger_ms=0,
                        max_request_size=self.max_bytes + REQUEST_OVERHEAD_BYTES,
                    )
                    await start_client(producer, CALL_TIMEOUT_S)  # stopped when its start fails or is cancelled
                    self._producer = producer
                producer = self._producer
                await self.send_due(
                    lambda record: wait_for(
                        producer.send_and_wait(self.topic, record.data, key=key, timestamp_ms=record.stamp_ms),
                        CALL_TIMEOUT_S,
                    )
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker is down or the topic cannot be written: sent again next sync
                self.records.labels("error").inc()
                log.warning(
                    "cluster usage: publishing to %s failed (%d record(s) waiting, sent again at the next sync): %r",
                    self.topic,
                    len(self.outbox),
                    exc,
                )
                producer, self._producer = self._producer, None
                if producer is not None:
                    await stop_client(producer)

    async def send_due(self, send: Callable[[Outgoing], Awaitable]) -> None:
        """Send the waiting records in order with ``send``, each taken off the outbox once it returns; one that
        raises stops the sync, and it and the rest are sent again at the next (tests call it)."""
        for record in self._due():
            await send(record)
            self.outbox.sent(record)
            self.records.labels("sent").inc()

    def _due(self) -> list[Outgoing]:
        """The records to send now, oldest first; those dropped unsent (older than quota.cluster.stale.ms, or past
        the outbox's bound) counted and logged."""
        due = self.outbox.due(self.wall.now_ms())
        expired, self._expired = self.outbox.expired - self._expired, self.outbox.expired
        if expired:
            self.records.labels("expired").inc(expired)
            log.warning(
                "cluster usage: %d usage record(s) could not be sent to %s within quota.cluster.stale.ms "
                "(%d ms) and were dropped: the peers would skip them as stale",
                expired,
                self.topic,
                self.peers.stale_ms,
            )
        return due

    def take_record(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> bool:
        """One record of the topic: whether its usage was recorded (all at once: tests call it)."""
        return self.follower.take_record(key, value, timestamp_ms)

    def _missing(self) -> None:
        """The topic does not exist: the publisher creates it (again) at once. A deleted topic is not otherwise
        noticed by the publisher (Tansu appends to a deleted topic's name and answers NONE), and the followers read
        nothing until it is back: every sidecar stayed in fallback for good (issue 35)."""
        if not self._topic_missing:
            log.warning("cluster usage topic %s does not exist: creating it (again)", self.topic)
        self._topic_missing = True
        self._woken.set()

    leave_on_stop = True  # a sidecar stopping says it left (a test turns it off to stand for one that died)

    async def stop(self) -> None:
        """Stop publishing and following; send the records still waiting and one of the usage since the last sync;
        then delete this sidecar's key from the topic (a tombstone), so that the others stop counting it as a live
        sidecar at once: a sidecar that stopped serves nothing, and a known one that stays silent would shrink their
        fallback share (quota / live sidecars). One that dies sends nothing and goes stale instead. Bounded: what a
        broker does not take within a second is not sent (no tombstone then)."""
        await cancel_all(self._tasks)
        producer, self._producer = self._producer, None
        if producer is not None:
            if self.leave_on_stop:
                try:
                    await wait_for(self._leave(producer), LEAVE_TIMEOUT_S)
                except Exception as exc:  # noqa: BLE001 (the broker is gone: the others see this one go stale)
                    log.warning(
                        "cluster usage: could not tell %s that sidecar %s leaves: %r", self.topic, self.own_id, exc
                    )
            await stop_client(producer)

    async def _leave(self, producer) -> None:
        key = self.own_id.encode()
        await self._sync()
        await self.send_due(
            lambda record: producer.send_and_wait(self.topic, record.data, key=key, timestamp_ms=record.stamp_ms)
        )
        await producer.send_and_wait(self.topic, None, key=key, timestamp_ms=self.wall.now_ms())
        self.records.labels("sent").inc()
