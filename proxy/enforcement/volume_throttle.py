"""What Produce consults for cluster volume usage: the latest snapshots (summarized), the state
:func:`quota.managers.volume.evaluate` derives from them, and a produce byte-rate manager whose limits are the configured
ones scaled by the state's factor (:mod:`quota.managers.volume_scaling`: a base rate where no per-entity
``producer_byte_rate`` applies, a shadow entry kept shadow). No I/O: the request path reads it, the follower or the DescribeLogDirs poller (:mod:`proxy.observers.volume_sources`) feeds it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from config.volume import VolumeUsageConfig
from proxy.ground.logs import LogLimiter
from quota.managers.client_quota import ClientQuotaManager
from quota.managers.volume import (
    BAD,
    INITIAL,
    PAUSE,
    TAKE,
    THROTTLE,
    Bounds,
    BrokerUsage,
    Snapshot,
    SnapshotError,
    TooManyVolumes,
    Verdict,
    VolumeState,
    evaluate,
    judge,
    parse_snapshot,
    summarize,
)
from quota.managers.volume_scaling import ScaledProduceQuotas
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

log = logging.getLogger("kafka_quota_proxy.volume")
BAD_RECORD_LOG = LogLimiter()  # one line per kind of bad record per 10 s, whatever a writer floods the topic with


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

    def __init__(
        self, config: VolumeUsageConfig, quotas: QuotaTable, clock, window: QuotaWindow, mute_max_ms: int, wall=None
    ) -> None:
        self.config = config
        self.clock = clock  # the quota windows' (monotonic) clock
        self.wall = wall or clock  # what snapshots are dated with and judged against (wall time; a fake in tests)
        self.bounds = Bounds(config.max_record_bytes, config.max_volumes_per_snapshot)
        self._quotas = quotas
        self.snapshots: dict[int, BrokerUsage] = {}  # each broker's latest snapshot taken, summarized
        self.live_brokers: set[int] | None = None
        self.state: VolumeState = INITIAL
        self._scaled_factor = 1.0  # what the produce manager's table is scaled by
        self.produce = ClientQuotaManager(
            ScaledProduceQuotas(quotas, 1.0, config.produce_base_rate), PRODUCER_BYTE_RATE, clock, window, mute_max_ms
        )
        # What a produce refused during PAUSE is charged where no producer_byte_rate applies: the base rate, unscaled
        # (proxy.apis.volume_pause.paused_produce), so a refused client is slowed as an answered one is.
        self.refused = ClientQuotaManager(
            ScaledProduceQuotas(quotas, 1.0, config.produce_base_rate), PRODUCER_BYTE_RATE, clock, window, mute_max_ms
        )
        self.skipped: dict[str, int] = {}  # records not taken, by reason (quota.managers.volume's fixed set)
        # requests refused (wholly or in part) because a volume is at PAUSE, by API name (proxy.apis.broker_writes)
        self.refused_writes: dict[str, int] = {}
        self.evaluations = 0
        self.on_evaluated: Callable[[], None] = lambda: None  # the timer re-arms on it
        self.evaluate()

    @property
    def paused(self) -> bool:
        return self.state.state == PAUSE

    def refused_write(self, api: str) -> None:
        """One request of ``api`` (Kafka's name) refused, wholly or in part, because a volume is at PAUSE."""
        self.refused_writes[api] = self.refused_writes.get(api, 0) + 1

    @property
    def throttling(self) -> bool:
        return self.state.state == THROTTLE

    @property
    def bad_records(self) -> int:
        return sum(self.skipped.values())

    def update_quotas(self, quotas: QuotaTable) -> None:
        """A new quota table: the scaled view follows it (its manager refreshes the sensors the changed entities
        reach)."""
        self._quotas = quotas
        self.produce.update_quotas(ScaledProduceQuotas(quotas, self._scaled_factor, self.config.produce_base_rate))
        self.refused.update_quotas(ScaledProduceQuotas(quotas, 1.0, self.config.produce_base_rate))

    def read(self, key: bytes | None, value: bytes | None) -> ReadRecord:
        return read_record(key, value, self.bounds, self.config.metrics_top_volumes)

    def record(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the volume-usage topic, read and taken at once."""
        self.take(key, self.read(key, value))

    def take(self, key: bytes | None, read: ReadRecord) -> None:
        """A record read (:meth:`read`), judged (:func:`quota.managers.volume.judge`) before it is taken: one that cannot
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
                log.warning(
                    "volume usage record %s (key %s; the broker's last good snapshot stays): %s%s",
                    "skipped" if verdict.action == BAD else "not taken",
                    repr((key or b"")[:40]),
                    verdict.reason[:300],
                    f" ({suppressed} more since the last line)" if suppressed else "",
                )
            return
        assert read.usage is not None  # taken: a snapshot with volumes (judge), so read_record summarized it
        self.snapshots[read.usage.broker_id] = read.usage
        self.evaluate()

    def accept(self, snapshot: Snapshot) -> None:
        """A snapshot the proxy made itself (DescribeLogDirs); bounded as a record is."""
        if len(snapshot.volumes) > self.bounds.max_volumes_per_snapshot:
            error = TooManyVolumes(
                f"broker {snapshot.broker_id}: {len(snapshot.volumes)} log dirs, more than "
                f"max_volumes_per_snapshot ({self.bounds.max_volumes_per_snapshot})"
            )
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
        self.state = evaluate(
            self.snapshots,
            self.live_brokers,
            self.wall.now_ms(),
            int(self.config.freshness_seconds * 1000),
            self.config.missing_data_action,
            self.config.metrics_top_volumes,
        )
        if self.state.state != before.state:
            log.warning(
                "volume usage: %s -> %s (factor %.2f%s)",
                before.state,
                self.state.state,
                self.state.factor,
                f", no fresh data from brokers {list(self.state.missing_data)[:20]}"
                if self.state.missing_data
                else ", no broker list or snapshot yet"
                if self.state.awaiting_data
                else "",
            )
        if self.state.factor != before.factor:
            self._rescale()
        self.on_evaluated()
        return self.state

    def _rescale(self) -> None:
        factor = self._scaled_factor = max(self.state.factor, 1e-6)  # PAUSE is handled before any byte rate
        self.produce.update_quotas(ScaledProduceQuotas(self._quotas, factor, self.config.produce_base_rate))
