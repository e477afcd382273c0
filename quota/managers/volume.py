"""Cluster-wide volume-usage throttling (the Strimzi quotas plugin's design, soft and hard limits kept). Pure.

Every broker's sidecar publishes a snapshot of its log-dir volumes (:func:`parse_snapshot` reads one, keyed by
broker id). From the snapshots of the live brokers, :func:`evaluate` decides one cluster-wide state:

- a limit is one of ``ConsumedSpace`` (bytes used), ``MinFreeBytes`` or ``MinFreePercentage`` (of capacity);
  each becomes a threshold of consumed bytes for a volume;
- a volume at or past its hard threshold: **PAUSE**;
- a volume between its soft and hard thresholds throttles in proportion to how far it is from soft towards hard:
  its factor is ``1 - (consumed - soft) / (hard - soft)``, 1 at the soft limit and 0 at the hard one;
- the smallest factor of all volumes of all live brokers wins (**THROTTLE** when below 1, else **OPEN**);
- a live broker with no snapshot fresher than ``freshness_seconds``: the configured fallback, PAUSE or OPEN,
  with ``missing_data`` set so the metric says why;
- nothing heard yet (no broker list and no snapshot, as at start-up): the same fallback, with ``awaiting_data``
  set. The seed's consumer "should take a configured action when it can not determine the state of all known
  brokers ... defaulting to PAUSE as the fail-safe"; a proxy that has not read a single snapshot cannot, and
  reporting OPEN then would let produce through while a disk may be full. Once the broker list is known, every
  live broker without a fresh snapshot is missing as above; snapshots taken before it (never, with either source:
  both learn the brokers first) stand for their brokers until it arrives.

A record is bounded before it is read: past ``max_record_bytes`` it is not decoded at all, and a snapshot
listing more than ``max_volumes_per_snapshot`` volumes is refused before any volume is built (:class:`Bounds`).
Before a record is taken, :func:`judge` checks what can be verified: a date no further in the future than
:data:`CLOCK_SKEW_MS`, a broker id the cluster's metadata lists, at least one volume. A tombstone proves nothing
about a disk, so it changes nothing: a broker's last good snapshot stays until its own next publication replaces
it or it goes stale.

A snapshot taken is reduced once (:func:`summarize`) to what the cluster's state needs: its smallest factor, how
many volumes it has and how full the fullest is, and its ``top`` volumes nearest their hard limit. :func:`evaluate`
combines these summaries, so its cost grows with the brokers, not with the volumes, and it says when it must run
again (``next_evaluation_ms``: the moment the next fresh snapshot goes stale); nothing else changes the state.

The proxy applies the factor to produce traffic only: it scales the produce byte quota (a base rate where no
per-entity quota applies), and PAUSE stops produce requests from reaching the broker.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

OPEN, THROTTLE, PAUSE = "OPEN", "THROTTLE", "PAUSE"
LIMIT_TYPES = ("ConsumedSpace", "MinFreeBytes", "MinFreePercentage")

# How far in the future a snapshot may be dated and still be taken. Hosts of one cluster keep their clocks within a
# second or so of each other (NTP); 30 s covers a badly synchronised host while staying well below the default
# ``freshness_seconds`` (60), so a snapshot taken at face value can never stay fresh for more than freshness + 30 s.
CLOCK_SKEW_MS = 30_000
MAX_UNVERIFIED_BROKERS = 1_000  # snapshots kept before the live brokers are known (bounded memory)

TAKE, BAD, IGNORED = "take", "bad", "ignored"
# Why a record was not taken (the bad-records metric's ``reason`` label): a fixed set, whatever a writer sends.
TOO_LARGE, TOO_MANY_VOLUMES, INVALID, NOT_VERIFIED = "too_large", "too_many_volumes", "invalid", "not_verified"
SKIP_REASONS = (TOO_LARGE, TOO_MANY_VOLUMES, INVALID, NOT_VERIFIED)


class SnapshotError(ValueError):
    """A snapshot that cannot be used; the message names the field."""

    reason = INVALID


class RecordTooLarge(SnapshotError):
    """Past ``max_record_bytes``: refused before a byte of it is decoded."""

    reason = TOO_LARGE


class TooManyVolumes(SnapshotError):
    """Past ``max_volumes_per_snapshot``: refused before any of its volumes is read."""

    reason = TOO_MANY_VOLUMES


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one record of the volume-usage topic may cost (``volume_usage`` settings of the same names)."""

    max_record_bytes: int = 1_048_576
    max_volumes_per_snapshot: int = 10_000


@dataclass(frozen=True, slots=True)
class Limit:
    type: str
    level: float

    def __post_init__(self) -> None:
        if self.type not in LIMIT_TYPES:
            raise SnapshotError(f"limit type {self.type!r} is not one of {', '.join(LIMIT_TYPES)}")
        if self.level < 0 or (self.type == "MinFreePercentage" and self.level > 100):
            raise SnapshotError(f"{self.type} level {self.level!r} is out of range")

    def consumed_threshold(self, capacity: int) -> float:
        """The consumed bytes at which this limit is reached on a volume of ``capacity`` bytes."""
        if self.type == "ConsumedSpace":
            return self.level
        if self.type == "MinFreeBytes":
            return capacity - self.level
        return capacity - capacity * self.level / 100.0

    def as_json(self) -> dict[str, object]:
        return {"type": self.type, "level": self.level}


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    capacity: int
    consumed: int
    soft_limit: Limit | None = None  # per-volume overrides of the snapshot's limits
    hard_limit: Limit | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    broker_id: int
    snapshot_at_ms: int
    soft_limit: Limit
    hard_limit: Limit
    volumes: tuple[Volume, ...]

    def to_json(self) -> bytes:
        """The record value, in the seed's schema."""

        def volume(v: Volume) -> dict[str, object]:
            out: dict[str, object] = {"VolumeName": v.name, "Capacity": v.capacity, "Consumed": v.consumed}
            if v.soft_limit is not None:
                out["SoftLimit"] = v.soft_limit.as_json()
            if v.hard_limit is not None:
                out["HardLimit"] = v.hard_limit.as_json()
            return out

        at = datetime.fromtimestamp(self.snapshot_at_ms / 1000).astimezone().isoformat()
        return json.dumps(
            {
                "SnapshotAt": at,
                "HardLimit": self.hard_limit.as_json(),
                "SoftLimit": self.soft_limit.as_json(),
                "Volumes": [volume(v) for v in self.volumes],
            }
        ).encode()


def _limit(raw: object, where: str) -> Limit:
    if not isinstance(raw, dict) or "type" not in raw or "level" not in raw:
        raise SnapshotError(f"{where}: expected {{type, level}}, got {raw!r}")
    level = raw["level"]
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise SnapshotError(f"{where}.level: expected a number, got {level!r}")
    try:
        return Limit(str(raw["type"]), float(level))
    except SnapshotError as exc:
        raise SnapshotError(f"{where}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Verdict:
    action: str  # TAKE, BAD (cannot be used) or IGNORED (well formed, but not taken at face value)
    reason: str = ""  # for the log line
    kind: str = ""  # for the metric: TOO_LARGE, TOO_MANY_VOLUMES, INVALID or NOT_VERIFIED

    @property
    def label(self) -> str:
        return self.kind or (NOT_VERIFIED if self.action == IGNORED else INVALID)


def judge(snapshot: Snapshot | None, known: Collection[int], live_brokers: set[int] | None, now_ms: int) -> Verdict:
    """Whether one parsed record of the volume-usage topic (None: a tombstone) may replace what is held for its
    broker; ``known``: the brokers a snapshot is held for. Only what the proxy can check itself is trusted: its own clock, the cluster's metadata."""
    if snapshot is None:
        return Verdict(IGNORED, "tombstone: a broker's snapshot is replaced only by a newer one or goes stale")
    if snapshot.snapshot_at_ms > now_ms + CLOCK_SKEW_MS:
        return Verdict(
            BAD,
            f"SnapshotAt is {(snapshot.snapshot_at_ms - now_ms) // 1000} s in the future "
            f"(more than the {CLOCK_SKEW_MS // 1000} s clock skew allowed)",
        )
    if not snapshot.volumes:
        return Verdict(BAD, "Volumes: empty (a broker has at least one log dir)")
    broker = snapshot.broker_id
    if live_brokers is not None and broker not in live_brokers:
        return Verdict(IGNORED, f"broker {broker} is not a live broker of the cluster")
    if live_brokers is None and broker not in known and len(known) >= MAX_UNVERIFIED_BROKERS:
        return Verdict(IGNORED, f"more than {MAX_UNVERIFIED_BROKERS} broker ids before the live brokers are known")
    return Verdict(TAKE)


def parse_snapshot(key: bytes | None, value: bytes | None, bounds: Bounds = Bounds()) -> Snapshot | None:
    """A record of the volume-usage topic; None for a tombstone. Raises SnapshotError naming the bad field, or
    one of its bounds' errors, checked before the work they bound: the size before decoding, the number of
    volumes before reading any."""
    size = len(key or b"") + len(value or b"")
    if size > bounds.max_record_bytes:
        raise RecordTooLarge(
            f"record of {size} bytes, more than max_record_bytes ({bounds.max_record_bytes}); not decoded"
        )
    if key is None:
        raise SnapshotError("record key: missing (expected the broker id)")
    try:
        broker_id = int(key.decode())
    except (UnicodeDecodeError, ValueError):
        raise SnapshotError(f"record key: expected a broker id, got {key!r}") from None
    if value is None:
        return None
    try:
        raw = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(f"record value: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise SnapshotError("record value: expected an object")
    try:
        at = datetime.fromisoformat(str(raw["SnapshotAt"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        raise SnapshotError(f"SnapshotAt: expected an ISO 8601 date-time, got {raw.get('SnapshotAt')!r}") from None
    if at.tzinfo is None:
        raise SnapshotError("SnapshotAt: a time zone is required")
    listed = raw.get("Volumes") or []
    if not isinstance(listed, list):
        raise SnapshotError(f"Volumes: expected a list, got {type(listed).__name__}")
    if len(listed) > bounds.max_volumes_per_snapshot:
        raise TooManyVolumes(
            f"Volumes: {len(listed)} volumes, more than max_volumes_per_snapshot ({bounds.max_volumes_per_snapshot})"
        )
    volumes = []
    for i, v in enumerate(listed):
        where = f"Volumes[{i}]"
        try:
            name, capacity, consumed = str(v["VolumeName"]), int(v["Capacity"]), int(v["Consumed"])
        except (KeyError, TypeError, ValueError):
            raise SnapshotError(f"{where}: expected VolumeName, Capacity and Consumed") from None
        if capacity <= 0 or consumed < 0:
            raise SnapshotError(f"{where}: Capacity must be > 0 and Consumed >= 0")
        volumes.append(
            Volume(
                name,
                capacity,
                consumed,
                _limit(v["SoftLimit"], f"{where}.SoftLimit") if "SoftLimit" in v else None,
                _limit(v["HardLimit"], f"{where}.HardLimit") if "HardLimit" in v else None,
            )
        )
    return Snapshot(
        broker_id,
        int(at.timestamp() * 1000),
        _limit(raw.get("SoftLimit"), "SoftLimit"),
        _limit(raw.get("HardLimit"), "HardLimit"),
        tuple(volumes),
    )


@dataclass(frozen=True, slots=True)
class VolumeReading:
    broker_id: int
    name: str
    capacity: int
    consumed: int
    factor: float  # 1: below soft, 0: at or past hard
    breach: str | None  # None, "soft" or "hard"

    @property
    def nearness(self) -> tuple[float, float]:
        """Sorts the volume nearest its hard limit first: the smallest factor, then the fullest."""
        return self.factor, -self.consumed / self.capacity


@dataclass(frozen=True, slots=True)
class BrokerUsage:
    """One broker's snapshot as the cluster's state needs it, computed once when the snapshot is taken."""

    broker_id: int
    snapshot_at_ms: int
    factor: float  # the smallest of its volumes
    volume_count: int
    max_usage_ratio: float  # consumed / capacity of its fullest volume
    soft_breaches: int  # volumes past their soft limit (those past the hard one included)
    hard_breaches: int
    nearest: tuple[VolumeReading, ...]  # its ``top`` volumes nearest their hard limit, nearest first


def summarize(snapshot: Snapshot, top: int) -> BrokerUsage:
    """One pass over the snapshot's volumes; only the ``top`` nearest their hard limit are kept."""
    keyed = []
    soft = hard = 0
    max_ratio = 0.0
    for i, v in enumerate(snapshot.volumes):
        factor, breach = volume_factor(v, snapshot.soft_limit, snapshot.hard_limit)
        ratio = v.consumed / v.capacity
        max_ratio = max(max_ratio, ratio)
        soft += breach is not None
        hard += breach == "hard"
        keyed.append((factor, -ratio, i, breach))
    nearest = tuple(
        VolumeReading(
            snapshot.broker_id,
            snapshot.volumes[i].name,
            snapshot.volumes[i].capacity,
            snapshot.volumes[i].consumed,
            factor,
            breach,
        )
        for factor, _, i, breach in heapq.nsmallest(top, keyed)
    )
    return BrokerUsage(
        snapshot.broker_id,
        snapshot.snapshot_at_ms,
        min((k[0] for k in keyed), default=1.0),
        len(keyed),
        max_ratio,
        soft,
        hard,
        nearest,
    )


@dataclass(frozen=True, slots=True)
class VolumeState:
    state: str  # OPEN, THROTTLE or PAUSE
    factor: float  # what the produce quota is scaled by (0 under PAUSE)
    missing_data: tuple[int, ...]  # live brokers with no fresh snapshot (the fallback applied for them)
    nearest: tuple[VolumeReading, ...]  # the fresh volumes nearest their hard limit (at most ``top``)
    volume_count: int  # volumes of the fresh snapshots
    max_usage_ratio: float
    soft_breaches: int
    hard_breaches: int
    snapshot_at_ms: dict[int, int]  # each known broker's latest snapshot date (their ages are read when scraped)
    next_evaluation_ms: int | None  # when the next fresh snapshot goes stale; None: time alone changes nothing
    awaiting_data: bool = False  # no broker list and no snapshot yet: the missing-data action applies to the cluster


INITIAL = VolumeState(OPEN, 1.0, (), (), 0, 0.0, 0, 0, {}, None)
"""The state before the first evaluation (what the first one is compared with); never what a proxy enforces."""


def volume_factor(volume: Volume, soft: Limit, hard: Limit) -> tuple[float, str | None]:
    """This volume's factor and breach, from the snapshot's limits unless the volume overrides them."""
    soft, hard = volume.soft_limit or soft, volume.hard_limit or hard
    hard_at = hard.consumed_threshold(volume.capacity)
    soft_at = soft.consumed_threshold(volume.capacity)
    if volume.consumed >= hard_at:
        return 0.0, "hard"
    if volume.consumed <= soft_at:
        return 1.0, None
    if hard_at <= soft_at:  # a soft limit past the hard one: only the hard limit means anything
        return 1.0, None
    return 1.0 - (volume.consumed - soft_at) / (hard_at - soft_at), "soft"


def evaluate(
    usages: dict[int, BrokerUsage],
    live_brokers: set[int] | None,
    now_ms: int,
    freshness_ms: int,
    missing_data_action: str,
    top: int = 10,
) -> VolumeState:
    """The cluster's state from each broker's summary. ``live_brokers`` None: not known yet, so the brokers are
    those with snapshots, and with none either nothing is known: ``missing_data_action`` (``awaiting_data``). A
    snapshot dated ``at`` is fresh while ``now - at <= freshness``."""
    awaiting = live_brokers is None and not usages
    brokers = set(usages) if live_brokers is None else set(live_brokers)
    fresh: list[BrokerUsage] = []
    missing: list[int] = []
    for broker in sorted(brokers):
        usage = usages.get(broker)
        if usage is None or now_ms - usage.snapshot_at_ms > freshness_ms:
            missing.append(broker)
        else:
            fresh.append(usage)
    factor = min((u.factor for u in fresh), default=1.0)
    if (missing or awaiting) and missing_data_action == PAUSE:
        factor = 0.0
    if factor <= 0.0:
        state = PAUSE
    elif factor < 1.0:
        state = THROTTLE
    else:
        state = OPEN
    nearest = heapq.nsmallest(top, (r for u in fresh for r in u.nearest), key=lambda r: r.nearness)
    return VolumeState(
        state,
        max(0.0, factor),
        tuple(missing),
        tuple(nearest),
        sum(u.volume_count for u in fresh),
        max((u.max_usage_ratio for u in fresh), default=0.0),
        sum(u.soft_breaches for u in fresh),
        sum(u.hard_breaches for u in fresh),
        {b: u.snapshot_at_ms for b, u in usages.items() if b in brokers},
        min((u.snapshot_at_ms + freshness_ms + 1 for u in fresh), default=None),
        awaiting,
    )
