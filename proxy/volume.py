"""Cluster-wide volume-usage throttling at run time: the publisher, the follower, and what Produce consults.

- :class:`VolumeThrottle` holds the latest snapshots and the state :func:`quota.volume.evaluate` derives from
  them, and a produce byte-rate manager whose limits are the configured ones scaled by the state's factor (a base
  rate where no per-entity ``producer_byte_rate`` applies). No I/O: the request path reads it.
- :class:`VolumeFollower` reads the volume-usage topic from the beginning with aiokafka and follows it (no
  consumer group: every proxy reads every partition), and knows the live brokers from the cluster's metadata; a
  record that cannot be used is logged and skipped, the last good snapshot of that broker stays.
- :class:`VolumePublisher` (sidecars next to a broker) measures the broker's log-dir volumes with ``os.statvfs``
  (or an injected source) on start-up and every interval, and publishes one snapshot keyed by broker id to the
  topic, created compacted if missing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from config.volume import VolumeUsageConfig
from proxy.tasks import stop_client
from quota.client_quota import ClientQuotaManager
from quota.entity import PRODUCER_BYTE_RATE, QuotaTable
from quota.rate import QuotaWindow
from proxy.following import CALL_TIMEOUT_S, CHECK_S, TopicReader
from proxy.logs import LogLimiter
from quota.volume import (BAD, INITIAL, PAUSE, TAKE, THROTTLE, Bounds, BrokerUsage, Snapshot, SnapshotError,
                          TooManyVolumes, Verdict, Volume, VolumeState, evaluate, judge, parse_snapshot, summarize)

log = logging.getLogger("kafka_quota_proxy.volume")
BAD_RECORD_LOG = LogLimiter()  # one line per kind of bad record per 10 s, whatever a writer floods the topic with

RECHECK_S = 10.0  # the staleness timer's longest sleep (a check, not an evaluation)
INLINE_RECORD_BYTES = 64 * 1024  # records bigger than this are read in a worker thread

NOT_ENOUGH_REPLICAS = 19  # retriable in every client; never reaches the log: the request is not forwarded


def scaled_produce_table(quotas: QuotaTable, factor: float, base_rate: float) -> QuotaTable:
    """Every ``producer_byte_rate`` entry scaled by ``factor``, and ``base_rate * factor`` for clients no entry
    covers (a ``{client-id: <default>}`` entry, unless one is configured)."""
    values = []
    has_default_client = False
    for entry in quotas.entries:
        if PRODUCER_BYTE_RATE not in entry.quotas:
            continue
        entity = {k: v for k, v in (("user", entry.entity.user), ("client-id", entry.entity.client_id)) if v is not None}
        has_default_client |= entity == {"client-id": "<default>"}
        values.append((entity, {PRODUCER_BYTE_RATE: entry.quotas[PRODUCER_BYTE_RATE] * factor}))
    if not has_default_client:
        values.append(({"client-id": "<default>"}, {PRODUCER_BYTE_RATE: base_rate * factor}))
    return QuotaTable.from_values(values)


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """A volume-usage record read and reduced (:func:`read_record`), not yet judged: its snapshot (None: a
    tombstone) and that snapshot's summary, or why it cannot be used."""

    snapshot: Snapshot | None = None
    usage: BrokerUsage | None = None
    error: SnapshotError | None = None


def read_record(key: bytes | None, value: bytes | None, bounds: Bounds, top: int) -> ReadRecord:
    """Parse (bounded before decoding) and summarize one record. Touches nothing shared, so a big record can be
    read in a worker thread while the event loop goes on serving clients."""
    try:
        snapshot = parse_snapshot(key, value, bounds)
    except SnapshotError as exc:
        return ReadRecord(error=exc)
    return ReadRecord(snapshot, None if snapshot is None or not snapshot.volumes else summarize(snapshot, top))


class VolumeThrottle:
    """What Produce consults: ``state`` (OPEN, THROTTLE, PAUSE) and ``produce``, the scaled byte-rate manager.

    The state is evaluated when what it depends on changes (a snapshot taken, the live brokers) and when a fresh
    snapshot goes stale (``due_in_ms``, :meth:`evaluate_if_due`), never on a timer for nothing; each evaluation
    costs O(brokers x metrics_top_volumes), whatever the snapshots' sizes."""

    def __init__(self, config: VolumeUsageConfig, quotas: QuotaTable, clock, window: QuotaWindow,
                 mute_max_ms: int, wall=None) -> None:
        self.config = config
        self.clock = clock  # the quota windows' (monotonic) clock
        self.wall = wall or clock  # what snapshots are dated with and judged against (wall time; a fake in tests)
        self.bounds = Bounds(config.max_record_bytes, config.max_volumes_per_snapshot)
        self._quotas = quotas
        self.snapshots: dict[int, BrokerUsage] = {}  # each broker's latest snapshot taken, summarized
        self.live_brokers: set[int] | None = None
        self.state: VolumeState = INITIAL
        self.produce = ClientQuotaManager(scaled_produce_table(quotas, 1.0, config.produce_base_rate),
                                          PRODUCER_BYTE_RATE, clock, window, mute_max_ms)
        self.skipped: dict[str, int] = {}  # records not taken, by reason (quota.volume's fixed set)
        self.evaluations = 0
        self.on_evaluated: Callable[[], None] = lambda: None  # the timer re-arms on it
        self.evaluate()

    @property
    def paused(self) -> bool:
        return self.state.state == PAUSE

    @property
    def throttling(self) -> bool:
        return self.state.state == THROTTLE

    @property
    def bad_records(self) -> int:
        return sum(self.skipped.values())

    def update_quotas(self, quotas: QuotaTable) -> None:
        self._quotas = quotas
        self._rescale()

    def read(self, key: bytes | None, value: bytes | None) -> ReadRecord:
        return read_record(key, value, self.bounds, self.config.metrics_top_volumes)

    def record(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the volume-usage topic, read and taken at once."""
        self.take(key, self.read(key, value))

    def take(self, key: bytes | None, read: ReadRecord) -> None:
        """A record read (:meth:`read`), judged (:func:`quota.volume.judge`) before it is taken: one that cannot
        be used or cannot be verified is counted by reason and logged (rate-limited per reason, one bounded line),
        and the broker's last good snapshot stays."""
        if read.error is not None:
            verdict = Verdict(BAD, str(read.error), read.error.reason)
        else:
            verdict = judge(read.snapshot, self.snapshots, self.live_brokers, self.wall.now_ms())
        if verdict.action != TAKE:
            self.skipped[verdict.label] = self.skipped.get(verdict.label, 0) + 1
            suppressed = BAD_RECORD_LOG.allow("volume-usage", verdict.label, time.monotonic())
            if suppressed is not None:
                log.warning("volume usage record %s (key %s; the broker's last good snapshot stays): %s%s",
                            "skipped" if verdict.action == BAD else "not taken", repr((key or b"")[:40]),
                            verdict.reason[:300], f" ({suppressed} more since the last line)" if suppressed else "")
            return
        self.snapshots[read.usage.broker_id] = read.usage
        self.evaluate()

    def accept(self, snapshot: Snapshot) -> None:
        """A snapshot the proxy made itself (DescribeLogDirs); bounded as a record is."""
        if len(snapshot.volumes) > self.bounds.max_volumes_per_snapshot:
            error = TooManyVolumes(f"broker {snapshot.broker_id}: {len(snapshot.volumes)} log dirs, more than "
                                   f"max_volumes_per_snapshot ({self.bounds.max_volumes_per_snapshot})")
            self.take(None, ReadRecord(error=error))
            return
        self.snapshots[snapshot.broker_id] = summarize(snapshot, self.config.metrics_top_volumes)
        self.evaluate()

    def brokers(self, live: set[int]) -> None:
        if live != self.live_brokers:
            self.live_brokers = set(live)
            self.evaluate()

    def due_in_ms(self) -> int | None:
        """How long until the state must be evaluated again (a fresh snapshot goes stale); None: never by time."""
        due = self.state.next_evaluation_ms
        return None if due is None else max(0, due - self.wall.now_ms())

    def evaluate_if_due(self) -> None:
        if self.due_in_ms() == 0:
            self.evaluate()

    def evaluate(self) -> VolumeState:
        before = self.state
        self.evaluations += 1
        self.state = evaluate(self.snapshots, self.live_brokers, self.wall.now_ms(),
                              int(self.config.freshness_seconds * 1000), self.config.missing_data_action,
                              self.config.metrics_top_volumes)
        if self.state.state != before.state:
            log.warning("volume usage: %s -> %s (factor %.2f%s)", before.state, self.state.state, self.state.factor,
                        f", no fresh data from brokers {list(self.state.missing_data)[:20]}"
                        if self.state.missing_data else "")
        if self.state.factor != before.factor:
            self._rescale()
        self.on_evaluated()
        return self.state

    def _rescale(self) -> None:
        factor = max(self.state.factor, 1e-6)  # PAUSE is handled before any byte rate
        self.produce.update_quotas(scaled_produce_table(self._quotas, factor, self.config.produce_base_rate))


def statvfs_volumes(log_dirs: tuple[str, ...]) -> list[Volume]:
    """The volumes under the broker's log dirs (one per filesystem), as ``os.statvfs`` sees them."""
    seen: dict[int, Volume] = {}
    for path in log_dirs:
        st = os.statvfs(path)
        device = os.stat(path).st_dev
        capacity = st.f_blocks * st.f_frsize
        free = st.f_bavail * st.f_frsize
        seen.setdefault(device, Volume(path, capacity, capacity - free))
    return list(seen.values())


class VolumePublisher:
    security: dict = {}  # aiokafka's security_protocol/ssl_context when the brokers speak TLS (set by the app)

    """Publishes this broker's snapshot every interval; errors are counted and retried at the next interval."""

    def __init__(self, config: VolumeUsageConfig, bootstrap: str, clock, metrics,
                 source: Callable[[], list[Volume]] | None = None) -> None:
        self.config = config
        self.publisher = config.publisher
        self.bootstrap = bootstrap
        self.clock = clock
        self.metrics = metrics
        self.source = source or (lambda: statvfs_volumes(self.publisher.log_dirs))
        self._producer = None
        self._task: asyncio.Task | None = None

    def snapshot(self) -> Snapshot:
        p = self.publisher
        return Snapshot(p.broker_id, self.clock.now_ms(), p.soft_limit, p.hard_limit, tuple(self.source()))

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _ensure_topic(self) -> None:
        from proxy.dynamic import ensure_topic

        await ensure_topic(self.bootstrap, self.config.topic, "kafka-quota-proxy-volume", self.security)

    async def _run(self) -> None:
        from aiokafka import AIOKafkaProducer

        key = str(self.publisher.broker_id).encode()
        while True:
            try:
                if self._producer is None:
                    await self._ensure_topic()
                    producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, client_id="kafka-quota-proxy-volume",
                                                **self.security,
                                                acks="all", enable_idempotence=False)
                    await producer.start()
                    self._producer = producer
                    self.metrics.volume_publisher_connected.set(1)
                await self._producer.send_and_wait(self.config.topic, self.snapshot().to_json(), key=key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker is down or the topic cannot be written: try again later
                self.metrics.volume_publish_errors.inc()
                self.metrics.volume_publisher_connected.set(0)
                log.warning("volume usage publication failed (retried in %.0f s): %r",
                            self.publisher.interval_seconds, exc)
                await self._close_producer()
            await asyncio.sleep(self.publisher.interval_seconds)

    async def _close_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await stop_client(producer)  # already failing, or stopping: the next interval starts afresh

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        await self._close_producer()


class _Evaluating:
    """A volume-usage source: its own tasks, plus a timer that evaluates the state when a fresh snapshot goes stale
    (snapshots age even when nothing arrives), re-armed by every evaluation."""

    security: dict = {}  # aiokafka's security_protocol/ssl_context when the brokers speak TLS (set by the app)
    throttle: VolumeThrottle
    _tasks: list

    async def _tick(self) -> None:
        rearm = asyncio.Event()
        self.throttle.on_evaluated = rearm.set
        while True:
            rearm.clear()
            due_ms = self.throttle.due_in_ms()
            # re-checked at least every RECHECK_S (cheap: no evaluation unless due), should the wall clock jump
            timeout = RECHECK_S if due_ms is None else min(RECHECK_S, due_ms / 1000.0)
            try:
                await asyncio.wait_for(rearm.wait(), timeout)
            except asyncio.TimeoutError:
                self.throttle.evaluate_if_due()

    async def _take(self, key: bytes | None, value: bytes | None) -> None:
        """A record of the topic: a big one is read in a worker thread (the loop serves clients meanwhile), records
        are still taken one at a time, in order."""
        if len(key or b"") + len(value or b"") > INLINE_RECORD_BYTES:
            read = await asyncio.to_thread(self.throttle.read, key, value)
        else:
            read = self.throttle.read(key, value)
        self.throttle.take(key, read)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass


class VolumeFollower(_Evaluating):
    """Reads the volume-usage topic from the beginning and follows it."""

    def __init__(self, throttle: VolumeThrottle, bootstrap: str) -> None:
        self.throttle = throttle
        self.bootstrap = bootstrap
        self._tasks: list[asyncio.Task] = []
        self._consumer = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._follow()), loop.create_task(self._tick())]

    async def _follow(self) -> None:
        from aiokafka import AIOKafkaConsumer

        topic = self.throttle.config.topic
        while True:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, client_id="kafka-quota-proxy-volume",
                                        **self.security,
                                        group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                                        metadata_max_age_ms=10_000)
            try:
                await asyncio.wait_for(consumer.start(), CALL_TIMEOUT_S)
                self._consumer = consumer
                reader = TopicReader(consumer, topic)
                while not await reader.open():  # not created yet (or deleted): the publisher creates it
                    self._learn_brokers(consumer)
                    await asyncio.sleep(CHECK_S)
                self._learn_brokers(consumer)
                next_check = time.monotonic() + CHECK_S
                while True:
                    batches = await consumer.getmany(timeout_ms=1000)
                    self._learn_brokers(consumer)
                    for records in batches.values():
                        for record in records:
                            await self._take(record.key, record.value)
                    if time.monotonic() >= next_check:
                        why = await reader.changed()
                        if why is not None:  # the last snapshots stay (they go stale); the new topic is read whole
                            log.warning("volume usage topic %s %s: reading it again from the beginning", topic, why)
                            break
                        next_check = time.monotonic() + CHECK_S
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker down: keep the last snapshots (they go stale), start over
                log.warning("volume usage topic not readable (retrying): %r", exc)
                await asyncio.sleep(1.0)
            finally:
                self._consumer = None
                await stop_client(consumer)

    def _learn_brokers(self, consumer) -> None:
        brokers = consumer._client.cluster.brokers()
        if brokers:
            self.throttle.brokers({b.nodeId for b in brokers})


__all__ = ["NOT_ENOUGH_REPLICAS", "VolumeFollower", "VolumePublisher", "VolumeThrottle"]


DESCRIBE_LOG_DIRS = 35
LOG_DIRS_VERSION = 4  # the first with total and usable bytes per log dir (KIP-827, Kafka 3.3)


def log_dirs_snapshot(broker_id: int, now_ms: int, config, response) -> Snapshot:
    """A broker's DescribeLogDirs answer as a snapshot: one volume per log dir, capacity = total bytes, consumed =
    total - usable. A log dir in error, or one whose broker does not report its size, is left out (logged)."""
    volumes = []
    for result in response.results:
        if result.error_code != 0:
            log.warning("volume usage: broker %d log dir %s: error %d, left out", broker_id, result.log_dir,
                        result.error_code)
            continue
        if result.total_bytes < 0 or result.usable_bytes < 0:
            log.warning("volume usage: broker %d does not report the size of log dir %s, left out", broker_id,
                        result.log_dir)
            continue
        volumes.append(Volume(result.log_dir, result.total_bytes, result.total_bytes - result.usable_bytes))
    if not volumes and response.error_code != 0:
        raise ValueError(f"DescribeLogDirs error {response.error_code}")
    return Snapshot(broker_id, now_ms, config.soft_limit, config.hard_limit, tuple(volumes))


class LogDirsPoller(_Evaluating):
    """``source: describe_log_dirs``: every interval, the cluster's brokers (Metadata) and each one's log dirs
    (DescribeLogDirs v4, no topics), bounded in time; a broker that does not answer keeps its last snapshot, which
    goes stale, and then ``missing_data_action`` applies to it. Needs DESCRIBE on the cluster (Kafka's ACL for
    DescribeLogDirs) where the cluster has an authorizer."""

    def __init__(self, throttle: VolumeThrottle, bootstrap: tuple, timeout_s: float, ssl_context=None) -> None:
        self.ssl_context = ssl_context
        self.throttle = throttle
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.config = throttle.config.describe_log_dirs
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()), loop.create_task(self._tick())]

    async def poll_once(self) -> int:
        """One round; how many brokers answered."""
        from proxy.codec.messages import new_request
        from proxy.discovery import ask, fetch_brokers

        brokers = None
        for address in self.bootstrap:
            try:
                brokers = await fetch_brokers(address, self.timeout_s, self.ssl_context)
                break
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                log.info("volume usage: %s did not answer Metadata: %s", address, exc or type(exc).__name__)
        if brokers is None:
            return 0
        self.throttle.brokers(set(brokers))
        answered = 0
        request = new_request(DESCRIBE_LOG_DIRS, LOG_DIRS_VERSION, topics=[])
        for broker_id, address in sorted(brokers.items()):
            try:
                response = await ask(address, DESCRIBE_LOG_DIRS, LOG_DIRS_VERSION, request, self.timeout_s,
                                     client_id="kafka-quota-proxy-volume", ssl_context=self.ssl_context)
                self.throttle.accept(log_dirs_snapshot(broker_id, self.throttle.wall.now_ms(), self.config,
                                                       response))
                answered += 1
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                log.warning("volume usage: broker %d (%s) did not answer DescribeLogDirs v%d (Kafka 3.3+ needed): "
                            "%s", broker_id, address, LOG_DIRS_VERSION, exc or type(exc).__name__)
        return answered

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.config.interval_seconds)
