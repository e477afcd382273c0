"""The follower half of ``quota.scope: cluster`` on sidecars (:mod:`proxy.observers.cluster_usage` publishes): it
reads the usage topic from the beginning with its own consumer (no group) and records every other sidecar's fresh
delta as remote usage, once per record however often it is read. Which records count is
:class:`~quota.sharing.cluster_peers.ClusterPeers`' to say (shared with the publisher, whose fallback reads it); what
the follower saw is counted in the publisher's ``cluster_usage_records``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator

from proxy.cluster.kafka_clients import Backoff, OwnKafka, start_client, stop_client
from proxy.ground.quiet import quiet
from proxy.observers.following import CALL_TIMEOUT_S, CHECK_S, TopicReader
from quota.sharing.cluster_peers import FUTURE, TAKE, ClusterPeers
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import UsageDeltaError, decode

log = logging.getLogger("kafka_quota_proxy.cluster_usage")

CLIENT_ID = "kafka-quota-proxy-cluster-usage"
RETRY_START_S, RETRY_MAX_S = 1.0, 10.0
REQUEST_OVERHEAD_BYTES = 4096  # aiokafka's max_request_size counts the record's key and headers too


def quiet_decode(value: bytes) -> UsageDelta:
    with quiet():
        return decode(value)


class UsageFollower:
    """Follows ``topic``: each record judged by ``peers`` (dated by ``wall``), decoded, and passed to ``record``
    (a peer's usage, its connection counts taken out; all at once or, when it returns an iterator, a step at a time);
    ``missing()`` when the topic does not exist (the publisher creates it); each record counted in ``records``."""

    def __init__(
        self,
        topic: str,
        kafka: OwnKafka,
        sync_s: float,
        max_bytes: int,
        peers: ClusterPeers,
        records,
        wall,
        record: Callable[[UsageDelta], Iterator | None],
        missing: Callable[[], None],
    ) -> None:
        self.topic = topic
        self.kafka = kafka
        self.sync_s = sync_s
        self.max_bytes = max_bytes
        self.peers = peers
        self.records = records
        self.wall = wall
        self._record_remote = record
        self._missing = missing
        self._future: set[str] = set()  # peers whose records are dated too far ahead (logged when it starts, ends)

    def take_record(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> bool:
        """One record of the topic: whether its usage was recorded (all at once: tests call it)."""
        if not self._wanted(key, value, timestamp_ms) or value is None:  # _wanted forgets a tombstone's sidecar
            return False
        try:
            delta = decode(value)
        except UsageDeltaError as exc:
            return self._broken(exc)
        if not self._fresh(key, delta, timestamp_ms):
            return False
        for _ in self.record(delta):
            pass
        return True

    async def take_record_stepwise(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> None:
        """:meth:`take_record` as the follower does it: decoded in a thread, recorded a step at a time between
        the proxy's other work (10^5 entities take about a second to record)."""
        if not self._wanted(key, value, timestamp_ms) or value is None:  # _wanted forgets a tombstone's sidecar
            return
        try:
            delta = await asyncio.to_thread(quiet_decode, value)
        except UsageDeltaError as exc:
            self._broken(exc)
            return
        if self._fresh(key, delta, timestamp_ms):
            for _ in self.record(delta):
                await asyncio.sleep(0)

    def _wanted(self, key: bytes | None, value: bytes | None, timestamp_ms: int) -> bool:
        """Whether a record is to be decoded: not a tombstone, and (by its key, the sidecar's id, before any
        decoding) not this sidecar's own nor stale."""
        if value is None:  # a tombstone: that sidecar left for good
            if key is not None:
                self.peers.forget(key.decode(errors="replace"))
            return False
        return key is None or self._judged(key.decode(errors="replace"), timestamp_ms)

    def _judged(self, source: str, timestamp_ms: int) -> bool:
        """Whether ``source``'s record is taken (quota.sharing.cluster_peers.ClusterPeers.judge); counted and, for records
        dated too far ahead, logged when a peer starts and stops sending them."""
        now = self.wall.now_ms()
        verdict = self.peers.judge(source, timestamp_ms, now)
        if verdict == FUTURE:
            self.records.labels("future").inc()
            if source not in self._future:
                self._future.add(source)
                log.warning(
                    "cluster usage: sidecar %s dates its records %d s ahead of this host's clock (more than "
                    "30 s): they are not taken until its clock is fixed (NTP)",
                    source,
                    (timestamp_ms - now) // 1000,
                )
            return False
        if source in self._future:
            self._future.discard(source)
            log.warning("cluster usage: sidecar %s dates its records within 30 s of this host's clock again", source)
        if verdict != TAKE:
            self.records.labels("skipped").inc()
            return False
        return True

    def _fresh(self, key: bytes | None, delta, timestamp_ms: int) -> bool:
        """A decoded record without a key is judged by the source it names; what it says its sender reads is noted;
        one applied already (by its number) is not applied again; counted as received, skipped or duplicate."""
        if key is None and not self._judged(delta.source, timestamp_ms):
            return False
        self.peers.reads(delta.source if key is None else key.decode(errors="replace"), delta.reads)
        if not self.peers.first_time(delta.source, delta.incarnation, delta.seq, timestamp_ms, self.wall.now_ms()):
            self.records.labels("duplicate").inc()
            return False
        self.records.labels("received").inc()
        return True

    def _broken(self, exc: UsageDeltaError) -> bool:
        self.records.labels("error").inc()
        log.warning("cluster usage: a record of %s skipped: %s", self.topic, exc)
        return False

    def record(self, delta: UsageDelta) -> Iterator:
        """Record a peer's usage (its connection counts are per proxy), in steps when ``record`` takes them."""
        steps = self._record_remote(dataclasses.replace(delta, listeners=(), ips=(), open_connections=()))
        return iter(()) if steps is None else steps

    async def follow(self) -> None:
        from aiokafka import AIOKafkaConsumer

        retry = Backoff(RETRY_START_S, RETRY_MAX_S)
        while True:
            consumer = AIOKafkaConsumer(
                **self.kafka.options(CLIENT_ID),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                metadata_max_age_ms=10_000,
                fetch_max_wait_ms=int(min(self.sync_s, 0.5) * 1000),
                max_partition_fetch_bytes=max(2**20, self.max_bytes + REQUEST_OVERHEAD_BYTES),
            )
            try:
                await start_client(consumer, CALL_TIMEOUT_S)
                reader = TopicReader(consumer, self.topic, self.kafka, client_id=CLIENT_ID)
                while not await reader.open():  # not created yet, or deleted: the publisher creates it
                    self._missing()
                    await asyncio.sleep(CHECK_S)
                retry.succeeded()
                next_check = time.monotonic() + CHECK_S
                while True:
                    batches = await consumer.getmany(timeout_ms=int(min(self.sync_s, 1.0) * 1000))
                    for records in batches.values():
                        for record in records:
                            await self.take_record_stepwise(record.key, record.value, record.timestamp)
                    if time.monotonic() >= next_check:
                        why = await reader.changed()
                        if why is not None:
                            log.warning(
                                "cluster usage topic %s %s: reading it again from the beginning", self.topic, why
                            )
                            break
                        next_check = time.monotonic() + CHECK_S
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker down: peers go stale meanwhile, then the share applies
                self.records.labels("error").inc()
                log.warning("cluster usage topic %s not readable (retrying): %r", self.topic, exc)
                await retry.wait()
            finally:
                await stop_client(consumer)
