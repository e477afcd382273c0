"""Cluster-wide volume-usage throttling at run time: the publisher and the sources that feed what Produce consults.

- :class:`~proxy.enforcement.volume_throttle.VolumeThrottle` holds the latest snapshots, the state
  and the scaled produce quota. No I/O: the request path reads it. The sources below evaluate it again only when
  a fresh snapshot goes stale (one timer, re-armed by every evaluation), and read a big record in a worker thread.
- :class:`VolumeFollower` reads the volume-usage topic from the beginning with aiokafka and follows it (no
  consumer group: every proxy reads every partition), and knows the live brokers from the cluster's metadata; a
  record that cannot be used is logged and skipped, the last good snapshot of that broker stays.
- :class:`VolumePublisher` (sidecars next to a broker) measures the broker's log-dir volumes with ``os.statvfs``
  (or an injected source) on start-up and every interval, and publishes one snapshot keyed by broker id to the
  topic, created compacted if missing.
- :class:`LogDirsPoller` (``source: describe_log_dirs``) asks every broker for its log dirs instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from config.volume import LogDirsConfig, PublisherConfig, VolumeUsageConfig
from proxy.cluster.kafka_clients import ASK_ERRORS, Backoff, ClusterLook, OwnKafka, ask, start_client, stop_client
from proxy.codec.apis import DESCRIBE_LOG_DIRS, OWN_DESCRIBE_LOG_DIRS_VERSION
from proxy.codec.error_codes import NONE
from proxy.codec.messages import new_request
from proxy.enforcement.volume_throttle import VolumeThrottle
from proxy.ground.tasks import cancel_all, wait_for
from proxy.observers.following import CALL_TIMEOUT_S, CHECK_S, TopicReader
from quota.managers.volume import Snapshot, Volume

if TYPE_CHECKING:
    from aiokafka import AIOKafkaProducer

    from proxy.ops.metrics import ProxyMetrics

log = logging.getLogger("kafka_quota_proxy.volume")

RECHECK_S = 10.0  # the staleness timer's longest sleep (a check, not an evaluation)
INLINE_RECORD_BYTES = 64 * 1024  # records bigger than this are read in a worker thread
CLIENT_ID = "kafka-quota-proxy-volume"
RETRY_START_S, RETRY_MAX_S = 1.0, 10.0  # the follower, while its topic cannot be read


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
    """Publishes this broker's snapshot every interval; errors are counted and retried at the next interval."""

    def __init__(
        self,
        config: VolumeUsageConfig,
        kafka: OwnKafka,
        clock,
        metrics,
        source: Callable[[], list[Volume]] | None = None,
    ) -> None:
        if config.publisher is None:
            raise ValueError("volume_usage has no publisher: nothing to publish")
        self.config = config
        self.publisher: PublisherConfig = config.publisher
        self.kafka = kafka
        self.clock = clock
        self.metrics = metrics
        self.source = source or (lambda: statvfs_volumes(self.publisher.log_dirs))
        self._producer: AIOKafkaProducer | None = None
        self._task: asyncio.Task | None = None

    def snapshot(self) -> Snapshot:
        p = self.publisher
        return Snapshot(p.broker_id, self.clock.now_ms(), p.soft_limit, p.hard_limit, tuple(self.source()))

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        from aiokafka import AIOKafkaProducer

        key = str(self.publisher.broker_id).encode()
        while True:
            try:
                if self._producer is not None and await self._topic_deleted():
                    log.warning("volume usage topic %s was deleted: creating it again", self.config.topic)
                    await self._close_producer()
                producer = self._producer
                if producer is None:
                    await self.kafka.ensure_topic(self.config.topic, CLIENT_ID)
                    producer = AIOKafkaProducer(**self.kafka.options(CLIENT_ID), acks="all", enable_idempotence=False)
                    await start_client(producer, None)  # stopped when its start fails or is cancelled
                    self._producer = producer
                    self.metrics.volume_publisher_connected.set(1)
                await producer.send_and_wait(self.config.topic, self.snapshot().to_json(), key=key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker is down or the topic cannot be written: try again later
                self.metrics.volume_publish_errors.inc()
                self.metrics.volume_publisher_connected.set(0)
                log.warning(
                    "volume usage publication failed (retried in %.0f s): %r", self.publisher.interval_seconds, exc
                )
                await self._close_producer()
            await asyncio.sleep(self.publisher.interval_seconds)

    async def _topic_deleted(self) -> bool:
        """Whether the cluster says the topic no longer exists (a Metadata look that never creates it). A producer
        is not told: a broker may append to a deleted topic (Tansu), or its metadata refresh create the topic
        again with the broker's defaults, not compacted."""
        look = await self.kafka.look([self.config.topic], CALL_TIMEOUT_S, CLIENT_ID)
        return look is not None and look.partitions.get(self.config.topic) == frozenset()

    async def _close_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await stop_client(producer)  # already failing, or stopping: the next interval starts afresh

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_all([self._task])
        await self._close_producer()


class _Evaluating:
    """A volume-usage source: its own tasks, plus a timer that evaluates the state when a fresh snapshot goes stale
    (snapshots age even when nothing arrives), re-armed by every evaluation."""

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
                await wait_for(rearm.wait(), timeout)
            except TimeoutError:
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
        await cancel_all(self._tasks)


class VolumeFollower(_Evaluating):
    """Reads the volume-usage topic from the beginning and follows it."""

    def __init__(self, throttle: VolumeThrottle, kafka: OwnKafka) -> None:
        self.throttle = throttle
        self.kafka = kafka
        self._tasks: list[asyncio.Task] = []
        self._consumer = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._follow()), loop.create_task(self._tick())]

    async def _follow(self) -> None:
        from aiokafka import AIOKafkaConsumer

        topic = self.throttle.config.topic
        retry = Backoff(RETRY_START_S, RETRY_MAX_S)
        while True:
            consumer = AIOKafkaConsumer(
                **self.kafka.options(CLIENT_ID),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                metadata_max_age_ms=10_000,
            )
            try:
                await start_client(consumer, CALL_TIMEOUT_S)
                self._consumer = consumer
                reader = TopicReader(consumer, topic, self.kafka, client_id=CLIENT_ID)
                while not await reader.open():  # not created yet (or deleted): the publisher creates it
                    self._learn_brokers(reader.last)
                    await asyncio.sleep(CHECK_S)
                retry.succeeded()
                self._learn_brokers(reader.last)
                next_check = time.monotonic() + CHECK_S
                while True:
                    batches = await consumer.getmany(timeout_ms=1000)
                    for records in batches.values():
                        for record in records:
                            await self._take(record.key, record.value)
                    if time.monotonic() >= next_check:
                        why = await reader.changed()
                        self._learn_brokers(reader.last)
                        if why is not None:  # the last snapshots stay (they go stale); the new topic is read whole
                            log.warning("volume usage topic %s %s: reading it again from the beginning", topic, why)
                            break
                        next_check = time.monotonic() + CHECK_S
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker down: keep the last snapshots (they go stale), start over
                log.warning("volume usage topic not readable (retrying): %r", exc)
                await retry.wait()
            finally:
                self._consumer = None
                await stop_client(consumer)

    def _learn_brokers(self, look: ClusterLook | None) -> None:
        """The live brokers, from the cluster's last Metadata answer (None: it did not answer, nothing changes)."""
        if look is not None and look.brokers:
            self.throttle.brokers(set(look.brokers))


def log_dirs_snapshot(broker_id: int, now_ms: int, config, response) -> Snapshot:
    """A broker's DescribeLogDirs answer as a snapshot: one volume per log dir, capacity = total bytes, consumed =
    total - usable. A log dir in error, or one whose broker does not report its size, is left out (logged)."""
    volumes = []
    for result in response.results:
        if result.error_code != NONE:
            log.warning(
                "volume usage: broker %d log dir %s: error %d, left out", broker_id, result.log_dir, result.error_code
            )
            continue
        if result.total_bytes < 0 or result.usable_bytes < 0:
            log.warning(
                "volume usage: broker %d does not report the size of log dir %s, left out", broker_id, result.log_dir
            )
            continue
        volumes.append(Volume(result.log_dir, result.total_bytes, result.total_bytes - result.usable_bytes))
    if not volumes and response.error_code != NONE:
        raise ValueError(f"DescribeLogDirs error {response.error_code}")
    return Snapshot(broker_id, now_ms, config.soft_limit, config.hard_limit, tuple(volumes))


class LogDirsPoller(_Evaluating):
    """``source: describe_log_dirs``: every interval, the cluster's brokers (Metadata) and each one's log dirs
    (DescribeLogDirs v4, no topics), bounded in time; a broker that does not answer keeps its last snapshot, which
    goes stale, and then ``missing_data_action`` applies to it. Needs DESCRIBE on the cluster (Kafka's ACL for
    DescribeLogDirs) where the cluster has an authorizer."""

    def __init__(self, throttle: VolumeThrottle, kafka: OwnKafka, timeout_s: float) -> None:
        self.throttle = throttle
        self.kafka = kafka
        self.timeout_s = timeout_s
        if throttle.config.describe_log_dirs is None:
            raise ValueError("volume_usage's source is not describe_log_dirs: nothing to poll")
        self.config: LogDirsConfig = throttle.config.describe_log_dirs
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()), loop.create_task(self._tick())]

    async def poll_once(self) -> int:
        """One round; how many brokers answered."""
        found = await self.kafka.look((), self.timeout_s, CLIENT_ID)
        if found is None:
            return 0
        brokers = found.brokers
        self.throttle.brokers(set(brokers))
        answered = 0
        version = OWN_DESCRIBE_LOG_DIRS_VERSION
        request = new_request(DESCRIBE_LOG_DIRS, version, topics=[])
        for broker_id, address in sorted(brokers.items()):
            try:
                response = await ask(
                    address,
                    DESCRIBE_LOG_DIRS,
                    version,
                    request,
                    self.timeout_s,
                    CLIENT_ID,
                    self.kafka.ssl_context,
                    self.kafka.sasl,
                )
                self.throttle.accept(log_dirs_snapshot(broker_id, self.throttle.wall.now_ms(), self.config, response))
                answered += 1
            except ASK_ERRORS as exc:
                log.warning(
                    "volume usage: broker %d (%s) did not answer DescribeLogDirs v%d (Kafka 3.3+ needed): %s",
                    broker_id,
                    address,
                    version,
                    str(exc) or type(exc).__name__,  # a timeout's str() is empty: its class says what happened
                )
        return answered

    async def _run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.config.interval_seconds)


def volume_sources(
    throttle: VolumeThrottle,
    kafka: OwnKafka,
    timeout_s: float,
    metrics: ProxyMetrics,
    source: Callable[[], list[Volume]] | None = None,
) -> list[VolumePublisher | VolumeFollower | LogDirsPoller]:
    """What ``volume_usage`` runs, not started: the log dirs polled (``source: describe_log_dirs``) or the topic
    followed, and this broker's snapshot published when the section has a publisher. ``source``: a simulated
    publisher's volumes (tests, the demo)."""
    config = throttle.config
    found: list[VolumePublisher | VolumeFollower | LogDirsPoller] = [
        LogDirsPoller(throttle, kafka, timeout_s)
        if config.describe_log_dirs is not None
        else VolumeFollower(throttle, kafka)
    ]
    if config.publisher is not None:
        found.append(VolumePublisher(config, kafka, throttle.wall, metrics, source))
    return found
