"""The dynamic configuration of a running proxy: follows the config topic and swaps the effective configuration in.

Every proxy reads the topic (``dynamic_config.topic``) from the beginning at start-up and then follows it (no
consumer group, like the volume-usage follower). The records of one poll are one batch
(:class:`config.dynamic_state.Batch`; while the follower is behind, the polls that follow at once join it, up to
CATCH_UP_RECORDS keys): each record is checked on its own; one that cannot be used is logged with its
key and reason, counted (``dynamic_config_bad_records_total``) and ignored, one past a bound of the section
(``max_key_bytes``, ``max_value_bytes``, ``max_entries``) is counted by reason
(``dynamic_config_records_skipped_total{reason}``), logged once per key and skipped; the entries in force stay. The
batch's new state is made from the one in force in work linear in what it changed, in slices between which the
event loop runs (SLICE_S), then put in force in one swap (``apply``: every quota manager takes it in one step of
the event loop, so no request sees half a batch). The topic is read from the beginning into fresh entries, put in
force once read to its end (start-up does not wait for that: the YAML applies until then, ``/readyz`` says not
ready, and no partial configuration is applied on the way). A missing topic is created; one that cannot be created or read is logged once
(``dynamic_config_available`` 0) and the proxy runs on what it has (YAML plus the entries it read last), retrying
after 1 s, then at longer intervals up to RETRY_S. A deleted topic takes its entries with it (YAML alone); a recreated one is read again from the
beginning (:class:`proxy.observers.following.TopicReader` notices). ``dynamic_config_lag_records`` and
``dynamic_config_last_read_age_seconds`` show how far behind it is.

Writes (AlterClientQuotas and IncrementalAlterConfigs served by the proxy) go through :meth:`DynamicConfig.write`,
which audits them (:mod:`proxy.ops.audit`: who, from where, before and after) and creates the topic
(``cleanup.policy=compact``) when it is missing. Every request to the cluster goes through
:mod:`proxy.cluster.kafka_clients`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from config.dynamic import DynamicEntries, Record, RecordError
from config.dynamic_source import DynamicConfigSource
from config.dynamic_state import SKIP_REASONS, STEP, Batch, DynamicState, RecordSkipped
from config.model import ProxyConfig
from proxy.cluster.kafka_clients import Backoff, OwnKafka, start_client, stop_client
from proxy.ground.logs import LogLimiter
from proxy.ground.tasks import wait_for
from proxy.observers.following import CALL_TIMEOUT_S, CHECK_S, TopicReader, log_end
from proxy.observers.freezing import freeze_long_lived
from proxy.ops import audit
from proxy.ops.audit import AuditedRecord, values_of

if TYPE_CHECKING:
    from aiokafka import AIOKafkaProducer

log = logging.getLogger(__name__)

RETRY_START_S, RETRY_S = 1.0, 5.0  # while the topic cannot be created or read: the first retry, the longest wait
WRITE_TIMEOUT_S = 15.0  # AlterClientQuotas: creating the topic if needed and appending the records
BAD_RECORD_LOG = LogLimiter()  # one line per 10 s, whatever a writer floods the topic with
SKIPPED_LOG = LogLimiter(interval_s=3600.0)  # a record past a bound: one line per key (and reason) an hour
SLICE_S = 0.005  # applying records: the event loop runs at least this often
FREEZE_AFTER = 1000  # entries changed between two gc.freeze calls (see DynamicConfig.swap)
POLL_RECORDS = 2000  # records a poll hands over (aiokafka makes them in one go: ~5 ms)
CATCH_UP_RECORDS = 20_000  # keys one batch changes at most while the follower is behind (see _read)


def _shown(key: bytes | None) -> str:
    """A record key for a log line: at most 100 bytes of it, and its length."""
    if key is None:
        return "(no key)"
    return f"{key[:100]!r}{f' ({len(key)} bytes)' if len(key) > 100 else ''}"


class DynamicConfig:
    def __init__(
        self,
        base: ProxyConfig,
        apply: Callable[[ProxyConfig], None],
        kafka: OwnKafka,
        client_id: str = "kafka-quota-proxy-config",
    ) -> None:
        if base.dynamic_config is None:
            raise ValueError("no dynamic_config section: no config topic to follow")
        self.base = base
        self.topic = base.dynamic_config.topic
        self.bounds: DynamicConfigSource = base.dynamic_config
        self.state = DynamicState.initial(base)
        self._apply = apply
        self.kafka = kafka  # how its clients reach the cluster
        self.client_id = client_id
        self.bad_records = 0
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)  # records past a bound of the section, by reason
        self.applied = 0
        self.swaps = 0  # states put in force (one per poll that changed something, one at the end of a read)
        self._unfrozen = 0  # entries changed since the last gc.freeze
        self.lag = 0
        self.last_read = 0.0  # monotonic time of the last successful poll, 0 never
        self.caught_up = asyncio.Event()  # set once the topic (or its absence) has been read
        self.available = 0  # 1 while the topic is read; 0 before and while it cannot be created or read
        self.unavailable: str | None = None  # why not, for the log (once per reason) and AlterClientQuotas
        self._task: asyncio.Task | None = None
        self._producer: AIOKafkaProducer | None = None
        self._write_lock = asyncio.Lock()
        self._context = contextvars.copy_context()
        self._retry = Backoff(RETRY_START_S, RETRY_S)

    @property
    def entries(self) -> DynamicEntries:
        """The entries in force."""
        return self.state.entries

    @property
    def current(self) -> ProxyConfig:
        """The effective configuration in force (the YAML with the entries laid over it)."""
        return self.state.config

    # -- records in ---------------------------------------------------------------------------------------------

    async def take(self, records, batch: Batch, live: bool = False) -> int:
        """Records of the config topic, in order, into ``batch`` (each checked with those before it); a record
        that cannot be used, or is past a bound, is counted, logged (bounded) and left out. ``live``: read while
        following, not at start-up: each change is logged with the writer its audit header names
        (:func:`proxy.ops.audit.read`). The event loop runs between slices of SLICE_S. Returns how many were good."""
        good = 0
        started = time.perf_counter()
        newer: dict[bytes, dict | None] = {}  # live: what this call changed, the values before the next record
        for record in records:
            try:
                checked = batch.add(record.key, record.value)
                if live:
                    key = checked.canonical
                    old = newer[key] if key in newer else values_of(self.entries.entries, key)
                    newer[key] = None if checked.values is None else dict(checked.values)
                    audit.read(self.topic, record.key, old, newer[key], getattr(record, "headers", None))
            except RecordSkipped as exc:
                self.skipped[exc.reason] += 1
                key = record.key or b""
                if SKIPPED_LOG.allow(repr(key[:200]), exc.reason, time.monotonic()) is not None:  # once per key
                    log.warning(
                        "dynamic config: record %s skipped (%s), the entries in force stay: %s",
                        _shown(key),
                        exc.reason,
                        str(exc)[:300],
                    )
            except RecordError as exc:
                self.bad_records += 1
                suppressed = BAD_RECORD_LOG.allow("config-topic", "bad-record", time.monotonic())
                if suppressed is not None:
                    log.warning(
                        "dynamic config: record %s ignored, the last good configuration stays: %s%s",
                        _shown(record.key),
                        str(exc)[:300],
                        f" ({suppressed} more since the last line)" if suppressed else "",
                    )
            else:
                good += 1
            if time.perf_counter() - started > SLICE_S:
                await asyncio.sleep(0)
                started = time.perf_counter()
        return good

    async def build(self, batch: Batch) -> DynamicState:
        """The state ``batch`` gives, made in slices of SLICE_S with the event loop running between them (nothing
        in force changes meanwhile)."""
        started = time.perf_counter()
        for _ in batch.build(STEP):
            self._freeze(STEP)  # what is made is the next state: long-lived
            if time.perf_counter() - started > SLICE_S:
                await asyncio.sleep(0)
                started = time.perf_counter()
        assert batch.result is not None
        return batch.result

    def swap(self, state: DynamicState, changed: int = 0) -> None:
        """Put a state in force (one step of the event loop: every manager takes it). Once FREEZE_AFTER entries
        have changed since it last did, the objects alive are moved out of the cyclic garbage collector's sight
        (:func:`~proxy.observers.freezing.freeze_long_lived`: collected, then ``gc.freeze``): a full collection walks every object it tracks with the GIL held (at 10^5 entries, 0.2-0.4
        s each, several during a start-up read or a burst), and the entries in force are long-lived by design. They
        are still freed, by reference counting, once replaced (the state holds no reference cycles)."""
        self.state = state
        self.swaps += 1
        self._apply(state.config)
        self._freeze(changed)

    def _freeze(self, changed: int) -> None:
        """``changed`` more entries made (taken into a batch, or put in force): gc.freeze once FREEZE_AFTER have."""
        self._unfrozen += changed
        if self._unfrozen >= FREEZE_AFTER:
            freeze_long_lived()
            self._unfrozen = 0

    # -- following ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start following in the background: start-up never waits for the topic; the YAML applies until the
        topic has been read to its end (``caught_up``)."""
        self._context = contextvars.copy_context()  # writes run in it too (the proxy's own clients' routing)
        self._task = asyncio.get_running_loop().create_task(self._follow())

    def _unavailable(self, kind: str, exc: BaseException) -> None:
        """The topic cannot be created or read: one log line (until it is read again), the gauge at 0, the YAML and
        the entries last read stay in force."""
        self.available = 0
        self.caught_up.set()  # as far as it can be: start-up and tests do not wait for a topic that cannot be read
        reason = f"{kind} ({str(exc)[:200] or type(exc).__name__})"
        if self.unavailable is None or not self.unavailable.startswith(kind):
            log.warning(
                "dynamic config: topic %s %s; running on the YAML%s, retrying (at most %.0f s apart)",
                self.topic,
                reason,
                " and the entries last read" if self.entries.entries else " alone",
                RETRY_S,
            )
        self.unavailable = reason

    async def _follow(self) -> None:
        from aiokafka import AIOKafkaConsumer

        while True:
            consumer = AIOKafkaConsumer(
                **self.kafka.options(self.client_id),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                metadata_max_age_ms=10_000,
                fetch_max_wait_ms=200,
            )
            try:
                await start_client(consumer, CALL_TIMEOUT_S)
                reader = TopicReader(consumer, self.topic, self.kafka, client_id=self.client_id)
                if not await reader.open():
                    await self._missing()
                    continue
                self._retry.succeeded()
                await self._read(consumer, reader)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker or topic unavailable: keep what is in force, retry
                self._unavailable("cannot be read", exc)
                await self._retry.wait()
            finally:
                await stop_client(consumer)

    async def _missing(self) -> None:
        """The topic does not exist (never created, or deleted): no dynamic entries, the YAML alone. It is created
        (compacted) so that every proxy reads the same topic from the start; if it cannot be, that is said once."""
        if self.entries.entries or self.current is not self.base:
            log.warning(
                "dynamic config: topic %s was deleted; its %d entries no longer apply: the YAML alone does",
                self.topic,
                len(self.entries.entries),
            )
            self.swap(DynamicState.initial(self.base))
        try:
            await self.kafka.ensure_topic(self.topic, self.client_id)
        except Exception as exc:  # noqa: BLE001 -- no right to create it, no broker: the YAML alone
            self._unavailable("does not exist and cannot be created", exc)
            await self._retry.wait()

    async def _read(self, consumer, reader: TopicReader) -> None:
        """Read the topic from the beginning into fresh entries, put them in force once read to the end (no partial
        configuration on the way), then follow it until it changes under the reader (deleted or recreated): each
        poll's records are one batch, put in force in one swap. While the follower is behind (a burst of writes),
        the polls that follow at once join the batch, up to CATCH_UP_RECORDS keys: a batch of 2,000 keys spread
        over 10^5 entries copies nearly every chunk of every map (quota.primitives.chunked), so a burst rewriting every entry
        copied the whole configuration 50 times, and the garbage collector walked each copy while young."""
        end = await reader.end_offsets()
        initial: Batch | None = Batch(DynamicState.initial(self.base), self.bounds)  # the topic rebuilt whole
        caught_up = fetched = False
        self.last_read = time.monotonic()
        next_check = time.monotonic() + CHECK_S
        while True:
            polled = await consumer.getmany(timeout_ms=200, max_records=POLL_RECORDS)
            if polled:
                batch = initial if initial is not None else Batch(self.state, self.bounds)  # None once caught up
                good = 0
                while True:
                    for records in polled.values():
                        good += await self.take(records, batch, live=caught_up)
                    if not caught_up or len(batch) >= CATCH_UP_RECORDS or not await self._behind(consumer, reader):
                        break
                    polled = await consumer.getmany(timeout_ms=0, max_records=POLL_RECORDS)
                    if not polled:
                        break
                self.applied += good
                if caught_up and len(batch):
                    self.swap(await self.build(batch), len(batch))
                elif not caught_up:  # a start-up read: the batch grows to every entry before it is put in force
                    self._freeze(good)
                    if not fetched:  # the first fetch's high watermark: Tansu lists the end too low (log_end)
                        end = {tp: log_end(offset, consumer.highwater(tp)) for tp, offset in end.items()}
                        fetched = True
                self.last_read = time.monotonic()
            positions = await reader.positions()
            self.lag = sum(max(0, (consumer.highwater(tp) or 0) - positions[tp]) for tp in positions)
            if not caught_up and all(positions[tp] >= end[tp] for tp in positions):
                caught_up = True
                assert initial is not None  # dropped only here, once caught up
                self.swap(await self.build(initial), len(initial))
                initial = None  # its records and the state it made are not held past the swap: once the entries
                # are rewritten (a burst), that would be the whole configuration a second time over
                self.available, self.unavailable = 1, None
                log.info("dynamic config: %d entries from %s in force", len(self.entries.entries), self.topic)
                self.caught_up.set()
            if time.monotonic() >= next_check:  # still the same topic? is the cluster still answering?
                why = await reader.changed()
                if why is not None:
                    log.warning("dynamic config: topic %s %s: reading it again from the beginning", self.topic, why)
                    return
                if reader.answered:  # the cluster answered (getmany does not say)
                    self.last_read = time.monotonic()
                next_check = time.monotonic() + CHECK_S

    @staticmethod
    async def _behind(consumer, reader: TopicReader) -> bool:
        """Whether records the brokers hold are not read yet (the last fetch's high watermark past the position)."""
        positions = await reader.positions()
        return any((consumer.highwater(tp) or 0) > position for tp, position in positions.items())

    # -- writing ------------------------------------------------------------------------------------------------

    async def write(self, records: list[Record], principal: str, address: str, via: str) -> None:
        """Append records (key, JSON value or None for a tombstone) that ``principal`` at ``address`` asked for
        through the API ``via``, each audited (logged, and given its audit header: :func:`proxy.ops.audit.audited`),
        to the topic, creating it when missing; raises on failure, bounded by WRITE_TIMEOUT_S (the caller answers
        with an error; the next write starts afresh)."""
        audited = audit.audited(self.entries.entries, records, principal, address, via)
        # in the context the follower started in, not the requesting client's: the proxy's own clients are routed
        # (proxy.cluster.own_clients.ROUTE) straight to the broker behind a sidecar
        write = asyncio.get_running_loop().create_task(self._write(audited), context=self._context.copy())
        try:
            await wait_for(write, WRITE_TIMEOUT_S)
        except Exception:
            producer, self._producer = self._producer, None
            if producer is not None:
                await stop_client(producer)
            raise

    def write_failure(self, exc: BaseException) -> str:
        """What AlterClientQuotas answers when :meth:`write` failed: the topic, and why."""
        why = f"{exc!r}" if not isinstance(exc, asyncio.TimeoutError) else f"no answer within {WRITE_TIMEOUT_S:.0f} s"
        known = f"; the proxy cannot follow it either: it {self.unavailable}" if self.unavailable else ""
        return f"the config topic {self.topic} could not be written: {why}{known}"[:500]

    async def _write(self, records: list[AuditedRecord]) -> None:
        from aiokafka import AIOKafkaProducer

        async with self._write_lock:
            producer = self._producer
            if producer is None:
                await self.kafka.ensure_topic(self.topic, self.client_id)
                producer = AIOKafkaProducer(**self.kafka.options(self.client_id), acks="all", request_timeout_ms=10_000)
                await start_client(producer, None)  # stopped when its start fails or is cancelled
                self._producer = producer
            futures = [
                await producer.send(self.topic, key=key, value=value, headers=headers)
                for key, value, headers in records
            ]
            await asyncio.gather(*futures)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # bounded: a follower cancelled inside an aiokafka call that does not end must not hold up shutdown
            await asyncio.wait({self._task}, timeout=STOP_WAIT_S)
        if self._producer is not None:
            await stop_client(self._producer)


STOP_WAIT_S = 5.0
