"""The user/client-id quotas' findings of an explanation: byte rates, controller mutations, producer ids. Pure.

The matching entry comes from the quota table's own resolution (:meth:`QuotaTable.matches`, the entries
:meth:`QuotaTable.resolve` tries, in its order), its level from :func:`quota.primitives.entity.precedence`; the
sensor from the manager's keeper, looked up and never made (:meth:`SensorKeeper.counted_in`: the entity's own, none
for one never seen or evicted from a full table). The throttle in force is the one a request
recorded now would be given: Kafka's ``(rate - limit) / limit * window`` on the rate measured now, or a token
bucket's debt, each capped as the manager caps it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypedDict, TypeVar

from quota.explain.values import BROKER, SHADOW, THROTTLED, UNLIMITED, WITHIN, Finding, FindingOf
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    LEVEL_PATHS,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    REQUEST_PERCENTAGE,
    REQUEST_RATE,
    QuotaTags,
    ResolvedQuota,
    precedence,
)
from quota.primitives.overflow import overflow_tags
from quota.primitives.quota_groups import QuotaGroupEntity, group_of_tags
from quota.primitives.sensor import ClientSensors
from quota.primitives.throttle import bounded_throttle_time_ms

if TYPE_CHECKING:
    from quota.managers.client_quota import ClientQuotaManager
    from quota.managers.mutation import ControllerMutationQuotaManager
    from quota.managers.producer_ids import ProducerIdQuotaManager
    from quota.primitives.sensor_keeper import SensorKeeper

UNITS = {
    PRODUCER_BYTE_RATE: "bytes/s",
    CONSUMER_BYTE_RATE: "bytes/s",
    CONTROLLER_MUTATION_RATE: "partition mutations/s",
    PRODUCER_IDS_RATE: "new producer ids per window",
    REQUEST_PERCENTAGE: "% of a request handler thread",
    REQUEST_RATE: "requests/s",
}
NOTHING_RECORDED = "nothing recorded for it within the last hour (no sensor)"
S = TypeVar("S", bound=ClientSensors)


def tags_text(tags: QuotaTags) -> str:
    """A sensor's tags as the metrics label them, each name quoted and escaped (client-chosen names); a quota
    group's as its name."""
    group = group_of_tags(tags)
    if group is not None:
        return f"quota-group={json.dumps(group)}"
    return f"user={json.dumps(tags.user)} client-id={json.dumps(tags.client_id)}"


class EntryFields(TypedDict):
    """What a finding says of the matching entry (:func:`entry_fields`)."""

    entity: str
    level: int
    level_path: str
    limit: float
    overridden: tuple[str, ...]


class SensorFields(TypedDict):
    """What a finding says of the sensor an entity is counted in (:func:`_sensor_fields`)."""

    counted_in: str
    overflow: bool
    notes: tuple[str, ...]


def entry_fields(candidates: list[ResolvedQuota]) -> EntryFields:
    """The matching entry (the first of ``candidates``, in precedence order), its level, and those it overrides.
    Every candidate matched an entry, so each names its entity."""
    first = candidates[0]
    assert first.entity is not None  # a match (QuotaTable.matches) has its entry's entity
    group = first.entity if isinstance(first.entity, QuotaGroupEntity) else None
    level = precedence(first.entity) if group is None else (3 if group.by_user else 7)  # the level it follows
    return {
        "entity": first.entity.path,
        "level": level,
        "level_path": LEVEL_PATHS[level - 1] if group is None else group.level_path,
        "limit": first.limit,
        "overridden": tuple(f"{c.entity.path} = {c.limit:.15g}" for c in candidates[1:] if c.entity is not None),
    }


def _full_note(manager: ClientQuotaManager) -> tuple[str, ...]:
    keeper = manager.keeper
    if len(keeper) >= keeper.max_tracked_entities:
        return (
            f"its table is full (quota.max.tracked.entities = {keeper.max_tracked_entities}): a new entity "
            "evicts one unused since it was last moved (its debt carried) and starts at its limit, without a "
            "fresh burst",
        )
    return ()


def _sensor_fields(sensors: ClientSensors, resolved: ResolvedQuota) -> SensorFields:
    overflow = sensors.tags != resolved.tags
    notes = (
        (
            "not tracked on its own (quota.max.tracked.entities reached when it came): counted with every other "
            "untracked entity of its quota in the <overflow> entity, which shares one budget",
        )
        if overflow
        else ()
    )
    return {"counted_in": tags_text(sensors.tags), "overflow": overflow, "notes": notes}


def _sensor_of(
    manager: ClientQuotaManager,
    keeper: SensorKeeper[S],
    candidates: list[ResolvedQuota],
    shadow_mode: bool,
    base: FindingOf,
    nothing: str,
) -> Finding | tuple[ResolvedQuota, bool, S]:
    """``(resolved, shadow, sensors)`` for the matching entry, or the finding already: no entry matches (nothing
    limits it) or no sensor lives (nothing recorded: within)."""
    if not candidates:
        return Finding(verdict=UNLIMITED, notes=("no entry matches: nothing limits it",), **base)
    resolved = candidates[0]
    shadow = shadow_mode or manager.shadow or resolved.shadow
    sensors = keeper.counted_in(resolved)
    if sensors is None:
        return Finding(
            verdict=WITHIN,
            measured=0.0,
            shadow=shadow,
            notes=(nothing,) + _full_note(manager),
            **entry_fields(candidates),
            **base,
        )
    return resolved, shadow, sensors


def byte_rate(
    manager: ClientQuotaManager, scope: str, candidates: list[ResolvedQuota], shadow_mode: bool, now_ms: int
) -> Finding:
    """``producer_byte_rate`` or ``consumer_byte_rate`` for the client ``candidates`` were resolved for."""
    base = FindingOf(quota=manager.quota_key, scope=scope, unit=UNITS[manager.quota_key])
    started = _sensor_of(manager, manager.keeper, candidates, shadow_mode, base, NOTHING_RECORDED)
    if isinstance(started, Finding):
        return started
    resolved, shadow, sensors = started
    rate, window_ms = sensors.rate.peek_with_window(now_ms)
    found = _sensor_fields(sensors, resolved)
    if manager.smoothing and sensors.smooth is not None:
        throttle = min(sensors.smooth.throttle_time_ms_at(now_ms), manager.max_throttle_time_ms)
        found["notes"] += ("quota.smoothing on: the throttle is the debt of its token bucket",)
    elif rate > resolved.limit:
        throttle = max(0, bounded_throttle_time_ms(rate, resolved.limit, window_ms, manager.max_throttle_time_ms))
    else:
        throttle = 0
    verdict = (SHADOW if shadow else THROTTLED) if throttle > 0 else WITHIN
    return Finding(
        verdict=verdict,
        measured=rate,
        throttle_ms=throttle,
        shadow=shadow,
        recent_throttle_ms=sensors.stats(now_ms).throttle_time_ms_max,
        **entry_fields(candidates),
        **found,
        **base,
    )


def mutations(
    manager: ControllerMutationQuotaManager, candidates: list[ResolvedQuota], shadow_mode: bool, now_ms: int
) -> Finding:
    """``controller_mutation_rate`` (KIP-599): a token bucket; a throttle is its debt, ``-tokens / rate``."""
    base = FindingOf(quota=CONTROLLER_MUTATION_RATE, scope="user/client-id", unit=UNITS[CONTROLLER_MUTATION_RATE])
    nothing = NOTHING_RECORDED + ": its bucket starts full"
    started = _sensor_of(manager, manager.keeper, candidates, shadow_mode, base, nothing)
    if isinstance(started, Finding):
        return started
    resolved, shadow, sensors = started
    bucket = sensors.bucket
    throttle = bucket.throttle_time_ms_at(now_ms)
    verdict = (SHADOW if shadow else THROTTLED) if throttle > 0 else WITHIN
    found = _sensor_fields(sensors, resolved)
    if throttle > 0:
        found["notes"] += (
            "CreateTopics, CreatePartitions and DeleteTopics are refused with THROTTLING_QUOTA_EXCEEDED "
            "(or throttled, for old versions) until the bucket is back at 0",
        )
    return Finding(
        verdict=verdict,
        measured=sensors.rate.peek(now_ms),
        throttle_ms=throttle,
        shadow=shadow,
        tokens=bucket.peek(now_ms),
        burst=bucket.burst,
        recent_throttle_ms=sensors.stats(now_ms).throttle_time_ms_max,
        **entry_fields(candidates),
        **found,
        **base,
    )


def producer_ids(
    manager: ProducerIdQuotaManager, scope: str, candidates: list[ResolvedQuota], shadow_mode: bool, now_ms: int
) -> Finding:
    """``producer_ids_rate`` (KIP-936): per user, a token bucket of new producer ids; under enforcement ``hold`` a
    new id past it is held in the proxy, under ``throttle`` its response throttled."""
    base = FindingOf(quota=PRODUCER_IDS_RATE, scope=scope, unit=UNITS[PRODUCER_IDS_RATE])
    if not candidates:
        return Finding(verdict=UNLIMITED, notes=("no user entry matches: nothing limits it",), **base)
    resolved = candidates[0]
    shadow = shadow_mode or manager.shadow or resolved.shadow
    user = resolved.tags.user
    state = manager.counted_in(user)
    if state is None:
        full = len(manager) >= manager.max_tracked_entities
        note = (
            "not tracked now (quota.max.tracked.entities users held): its next new id makes room by evicting an "
            "unused user, and its bucket starts with one token, less what it owed if it was evicted"
            if full and overflow_tags(resolved) is not None
            else "no new producer id counted within its window: its bucket starts full"
        )
        return Finding(verdict=WITHIN, shadow=shadow, notes=(note,), **entry_fields(candidates), **base)
    bucket = state.bucket
    debt = bucket.throttle_time_ms_at(now_ms)
    holding = state.holding or {}
    held_ms = max((until - now_ms for until, _ in holding.values()), default=0)
    notes = [
        f"enforcement {manager.enforcement} (producer.id.quota.enforcement); only new producer ids are "
        "counted: producers already known go through"
    ]
    if holding:
        notes.append(
            f"{len(holding)} new producer id(s) held in the proxy now, the last until {max(held_ms, 0)} ms from now"
        )
    throttle = max(min(debt, manager.max_mute_ms), held_ms)
    verdict = (SHADOW if shadow else THROTTLED) if throttle > 0 else WITHIN
    return Finding(
        verdict=verdict,
        throttle_ms=throttle,
        shadow=shadow,
        tokens=bucket.peek(now_ms),
        burst=bucket.burst,
        counted_in=tags_text(state.tags),
        notes=tuple(notes),
        **entry_fields(candidates),
        **base,
    )


def request_percentage() -> Finding:
    return Finding(
        quota=REQUEST_PERCENTAGE,
        scope="user/client-id",
        verdict=BROKER,
        unit=UNITS[REQUEST_PERCENTAGE],
        notes=(
            "enforced by the brokers, not the proxy (a proxy cannot measure a broker's request-handler "
            "time): kafka-configs through the proxy describes and alters it at the brokers; a broker's "
            "throttle reaches the client in the response's throttle_time_ms",
        ),
    )
