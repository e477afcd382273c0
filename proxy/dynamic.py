"""The dynamic configuration of a running proxy: follows the config topic and swaps the effective configuration in.

Every proxy reads the topic (``dynamic_config.topic``) from the beginning at start-up and then follows it (no
consumer group, like the volume-usage follower). Each record goes through :meth:`DynamicEntries.apply`: a record
that cannot be used is logged with its key and reason, counted (``dynamic_config_bad_records_total``) and ignored,
and the last good configuration stays in force. The effective configuration the good records of a fetched batch
give (YAML with every dynamic entry laid over it) goes to ``apply`` once per batch, which swaps it into every
quota manager in one step of the event loop (reading a long topic at start-up does not rebuild every table once
per record). While the topic cannot be read the proxy runs on what it has (YAML plus the entries it
read last) and retries every second; ``dynamic_config_lag_records`` and ``dynamic_config_last_read_age_seconds``
show how far behind it is.

Writes (AlterClientQuotas served by the proxy) go through :meth:`DynamicConfig.write`, which creates the topic
(``cleanup.policy=compact``) when it is missing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from config.dynamic import DynamicEntries, RecordError
from config.model import ProxyConfig
from proxy.logs import LogLimiter
from proxy.tasks import stop_client

log = logging.getLogger(__name__)

CATCH_UP_S = 5.0  # start-up waits at most this long to have read the topic to its end
BAD_RECORD_LOG = LogLimiter()


class DynamicConfig:
    def __init__(self, base: ProxyConfig, apply: Callable[[ProxyConfig], None], bootstrap: str,
                 client_id: str = "kafka-quota-proxy-config") -> None:
        self.base = base
        self.topic = base.dynamic_config.topic
        self.entries = DynamicEntries()
        self.current = base
        self._apply = apply
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.bad_records = 0
        self.applied = 0
        self.lag = 0
        self.last_read = 0.0  # monotonic time of the last successful poll, 0 never
        self.caught_up = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._producer = None
        self._write_lock = asyncio.Lock()
        self.security: dict = {}  # aiokafka's security_protocol/ssl_context when the brokers speak TLS

    # -- records in ---------------------------------------------------------------------------------------------

    def records(self, batch) -> int:
        """Records of the config topic, in order (each checked with those before it); the configuration they
        give is applied once, at the end. Returns how many were good."""
        good = 0
        for record in batch:
            try:
                self.entries, self.current = self.entries.apply(self.base, record.key, record.value)
            except RecordError as exc:
                self.bad_records += 1
                suppressed = BAD_RECORD_LOG.allow("config-topic", str(record.key)[:200], time.monotonic())
                if suppressed is not None:
                    log.warning("dynamic config: record ignored, the last good configuration stays: %s", exc)
                continue
            good += 1
        if good:
            self._apply(self.current)
            self.applied += good
        return good

    # -- following ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow())
        try:
            await asyncio.wait_for(self.caught_up.wait(), CATCH_UP_S)
        except asyncio.TimeoutError:
            log.warning("dynamic config: topic %s not read to its end within %.0f s; running on what is read so far "
                        "(YAML at least) and catching up in the background", self.topic, CATCH_UP_S)

    async def _follow(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        warned = False
        while True:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, client_id=self.client_id, group_id=None,
                                        **self.security,
                                        enable_auto_commit=False, auto_offset_reset="earliest",
                                        metadata_max_age_ms=10_000, fetch_max_wait_ms=200)
            try:
                await consumer.start()
                partitions = consumer.partitions_for_topic(self.topic)
                if not partitions:
                    await consumer._client.force_metadata_update()
                    partitions = consumer.partitions_for_topic(self.topic)
                if not partitions:  # nothing written yet: YAML alone is the configuration
                    self.caught_up.set()
                    self.last_read = time.monotonic()
                    if not warned:
                        log.info("dynamic config: topic %s does not exist yet; YAML alone applies", self.topic)
                        warned = True
                    await asyncio.sleep(1.0)
                    continue
                tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                end = await consumer.end_offsets(tps)
                self.last_read = time.monotonic()
                next_check = time.monotonic() + 1.0
                while True:
                    batches = await consumer.getmany(timeout_ms=200)
                    for records in batches.values():
                        self.records(records)
                        self.last_read = time.monotonic()
                    if time.monotonic() >= next_check:  # is the cluster still answering? (getmany does not say)
                        next_check = time.monotonic() + 1.0
                        try:
                            if await asyncio.wait_for(asyncio.shield(consumer._client.force_metadata_update()), 2.0):
                                self.last_read = time.monotonic()
                        except asyncio.TimeoutError:
                            pass
                    positions = {tp: await consumer.position(tp) for tp in tps}
                    self.lag = sum(max(0, (consumer.highwater(tp) or 0) - positions[tp]) for tp in tps)
                    if not self.caught_up.is_set() and all(positions[tp] >= end[tp] for tp in tps):
                        log.info("dynamic config: %d entries from %s in force", len(self.entries.entries), self.topic)
                        self.caught_up.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker or topic unavailable: keep what is in force, retry
                log.warning("dynamic config: topic %s not readable (retrying; the last configuration stays): %r",
                            self.topic, exc)
                await asyncio.sleep(1.0)
            finally:
                await stop_client(consumer)

    # -- writing ------------------------------------------------------------------------------------------------

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append records (key, JSON value or None for a tombstone) to the topic, creating it when missing; raises
        on failure (the caller answers with an error)."""
        from aiokafka import AIOKafkaProducer

        async with self._write_lock:
            if self._producer is None:
                await ensure_topic(self.bootstrap, self.topic, self.client_id, self.security)
                producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, client_id=self.client_id, acks="all",
                                            **self.security,
                                            request_timeout_ms=10_000)
                await producer.start()
                self._producer = producer
            futures = [await self._producer.send(self.topic, key=key, value=value) for key, value in records]
            await asyncio.gather(*futures)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self._producer is not None:
            await stop_client(self._producer)


async def ensure_topic(bootstrap: str, topic: str, client_id: str, security: dict | None = None) -> None:
    """Create one of the proxy's compacted topics (config, volume usage; one partition: one order for every key) if
    it is missing. Operators create them with their own replication factor for production."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id, **(security or {}))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


class DynamicConfigCollector:
    """The dynamic configuration's health, at scrape time."""

    def __init__(self, dynamic: DynamicConfig) -> None:
        self._dynamic = dynamic

    def describe(self) -> list:
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from proxy.metrics import PREFIX

        d = self._dynamic
        name = f"{PREFIX}_dynamic_config"
        bad = CounterMetricFamily(f"{name}_bad_records", "Config-topic records ignored (logged with their key and "
                                  "reason); the last good configuration stayed in force.")
        bad.add_metric([], d.bad_records)
        applied = CounterMetricFamily(f"{name}_applied", "Config-topic records that changed the configuration.")
        applied.add_metric([], d.applied)
        entries = GaugeMetricFamily(f"{name}_entries", "Dynamic entries in force (entities and proxy settings).")
        entries.add_metric([], len(d.entries.entries))
        lag = GaugeMetricFamily(f"{name}_lag_records", "Records of the config topic not read yet.")
        lag.add_metric([], d.lag)
        age = GaugeMetricFamily(f"{name}_last_read_age_seconds", "Seconds since the config topic was last read "
                                "(grows while it cannot be; -1 before the first read).")
        age.add_metric([], time.monotonic() - d.last_read if d.last_read else -1.0)
        yield from (bad, applied, entries, lag, age)
