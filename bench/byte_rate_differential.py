"""Differential run of the byte-rate quota manager against an older revision of it: the same random operations on
both, every decision and every stat compared.

The old ``quota/managers/client_quota.py`` and ``quota/primitives/sensor.py`` are read from git (``--old``, default the revision before
the known-client lookup served every quota shape) and loaded beside the current ones; everything else they import is
the current tree's (the old manager asks its table ``names_both``, answered from ``tag_parts``). Each run draws the
shape of its quota table (client-id entries only, user entries only, user and client-id pairs, or any mix; named
entities and defaults, shadow entries), then operations: checked and unchecked records (``record_and_decide``,
``record_and_get_throttle_time_ms``, ``record_no_throttle``, ``unrecord``), headroom (``max_value_in_quota_window``,
``remaining_in_quota_window``), a peer's usage (``record_remote``, ``record_remote_rows``), quota changes (an entity
added, changed, removed or its shadow flag flipped, through ``with_changes``; sometimes a table made from scratch;
in a fifth of the runs the manager resolves through the volume-scaled view, whose factor changes too), smoothing switched, expiry, with the clock moving by steps from 0 to past
the sensors' expiration. Clients include the empty user and client-id. Any difference is an error.

Usage: ``python bench/byte_rate_differential.py [--old REV] [--runs 300] [--steps 2000]``.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from quota.managers import client_quota as new_module  # noqa: E402
from quota.managers.volume_scaling import ScaledProduceQuotas  # noqa: E402
from quota.primitives.clock import ManualClock  # noqa: E402
from quota.primitives.entity import PRODUCER_BYTE_RATE, QuotaEntity, QuotaEntry  # noqa: E402
from quota.primitives.quota_table import QuotaTable  # noqa: E402
from quota.primitives.rate import QuotaWindow  # noqa: E402

P = PRODUCER_BYTE_RATE
USERS = ["alice", "bob", "carol", "", "ANONYMOUS"]
CLIENTS = ["etl", "web", "cli", ""]
SHAPES = {  # the entities a run's tables are made of
    "client-id": [(None, "etl"), (None, "web"), (None, "<default>"), (None, "")],
    "user": [("alice", None), ("bob", None), ("<default>", None), ("", None)],
    "pair": [("alice", "etl"), ("bob", "<default>"), ("<default>", "web"), ("<default>", "<default>"), ("", "")],
}
SHAPES["any"] = SHAPES["client-id"] + SHAPES["user"] + SHAPES["pair"] + [("<default>", "")]


# Modules the old manager imports that moved since (old name -> today's)
MOVED = {"quota.sharing.usage_tap": "quota.primitives.usage_tap"}


def load_old(revision: str) -> types.ModuleType:
    def source(path: str) -> str:
        return subprocess.run(
            ["git", "-C", ROOT, "show", f"{revision}:{path}"], check=True, capture_output=True, text=True
        ).stdout

    sensor = types.ModuleType("old_sensor")
    sys.modules["old_sensor"] = sensor
    exec(compile(source("quota/primitives/sensor.py"), "old_sensor", "exec"), sensor.__dict__)
    text = source("quota/managers/client_quota.py").replace(
        "from quota.primitives.sensor import", "from old_sensor import"
    )
    for moved, now in MOVED.items():  # a module the old manager imports that has moved since: today's, where it is
        text = text.replace(f"from {moved} import", f"from {now} import")
    module = types.ModuleType("old_client_quota")
    sys.modules["old_client_quota"] = module
    exec(compile(text, "old_client_quota", "exec"), module.__dict__)
    return module


class OldTable:
    """A table (or volume-scaled view) as the old manager asks it: ``names_both`` as it was."""

    def __init__(self, table) -> None:
        self.table = table

    def names_both(self, key: str) -> bool:
        return (True, True) in self.table.tag_parts(key)

    def changes_since(self, older):
        return self.table.changes_since(older.table if isinstance(older, OldTable) else older)

    def __getattr__(self, name):
        return getattr(self.table, name)


def entry(rng: random.Random, entity: QuotaEntity) -> QuotaEntry:
    return QuotaEntry(entity, {P: rng.choice([0, 50, 200, 1000, 5000])}, rng.random() < 0.15)


def make_table(rng: random.Random, shape: str) -> QuotaTable:
    entities = [QuotaEntity(u, c) for u, c in SHAPES[shape] if rng.random() < 0.6]
    return QuotaTable([entry(rng, e) for e in entities])


def change(rng: random.Random, table: QuotaTable, shape: str) -> QuotaTable:
    changes = {}
    for _ in range(rng.choice([1, 1, 2, 3])):
        u, c = rng.choice(SHAPES[shape if rng.random() < 0.9 else "any"])  # sometimes out of the run's shape
        entity = QuotaEntity(u, c)
        old = table.entry(entity)
        if old is not None and rng.random() < 0.3:
            changes[entity] = None
        elif old is not None and rng.random() < 0.3:
            changes[entity] = QuotaEntry(entity, old.quotas, not old.shadow)
        else:
            changes[entity] = entry(rng, entity)
    return table.with_changes(changes)


def stats(manager, now: int) -> list:
    return sorted(
        (
            tuple(s.tags),
            s.entity,
            s.limit,
            round(s.rate, 6),
            s.value_total,
            s.throttle_time_ms_total,
            s.throttle_time_ms_max,
            s.throttled_count,
            s.last_record_ms,
            s.shadow,
            s.shadow_throttle_time_ms_total,
            s.shadow_throttled_count,
        )
        for s in manager.stats(now)
    )


def plain(answer):
    """An answer as plain values: the old tree's ``EntityStats`` is a class of its own (and a stat's rate may be
    NaN, which equals nothing)."""
    if isinstance(answer, tuple) and not hasattr(answer, "_fields"):
        return tuple(plain(item) for item in answer)
    if type(answer).__name__ == "EntityStats":
        return tuple(
            "nan" if isinstance(v, float) and math.isnan(v) else v
            for v in (getattr(answer, name) for name in answer.__dataclass_fields__)
        )
    return answer


def one_run(old_module, seed: int, steps: int) -> tuple[str, int]:
    """Runs one workload on both managers; returns the shape and the number of operations compared. Raises
    AssertionError at the first difference."""
    rng = random.Random(seed)
    shape = rng.choice(list(SHAPES))
    window = QuotaWindow(rng.choice([2, 11]), rng.choice([1, 2]))
    expiration = rng.choice([5_000, 60_000, 3_600_000])
    table = make_table(rng, shape)
    # A volume manager's produce quotas: always the volume-scaled view, (factor, base rate)
    view = (1.0, rng.choice([100, 1000])) if rng.random() < 0.2 else None
    quotas = table if view is None else ScaledProduceQuotas(table, *view)
    clocks = ManualClock(), ManualClock()
    old = old_module.ClientQuotaManager(
        OldTable(quotas), P, clocks[0], window, inactive_sensor_expiration_ms=expiration
    )
    new = new_module.ClientQuotaManager(quotas, P, clocks[1], window, inactive_sensor_expiration_ms=expiration)
    smoothing = False
    clients = [(u, c) for u in USERS for c in CLIENTS]
    hot = rng.sample(clients, rng.choice([1, 3, 8]))  # most records from a few clients, as known tenants
    compared = 0
    for step in range(steps):
        now = clocks[0].now_ms()
        user, client_id = rng.choice(hot) if rng.random() < 0.8 else rng.choice(clients)
        value = rng.choice([0, 1, 10, 100, 1000, 10_000])
        op = rng.random()
        if op < 0.40:
            a = old.record_and_decide(user, client_id, value, now)
            b = new.record_and_decide(user, client_id, value, now)
        elif op < 0.48:
            a = old.record_and_get_throttle_time_ms(user, client_id, value)
            b = new.record_and_get_throttle_time_ms(user, client_id, value)
        elif op < 0.52:
            a = old.record_no_throttle(user, client_id, value)
            b = new.record_no_throttle(user, client_id, value)
        elif op < 0.55:
            a = old.unrecord(user, client_id, value, now)
            b = new.unrecord(user, client_id, value, now)
        elif op < 0.63:
            a = (
                old.max_value_in_quota_window(user, client_id),
                old.cap_to_quota_window(user, client_id, 10**9),
                old.remaining_in_quota_window(user, client_id),
            )
            b = (
                new.max_value_in_quota_window(user, client_id),
                new.cap_to_quota_window(user, client_id, 10**9),
                new.remaining_in_quota_window(user, client_id),
            )
        elif op < 0.66:
            a = old.record_remote(user, client_id, value, now)
            b = new.record_remote(user, client_id, value, now)
        elif op < 0.68:
            rows = [rng.choice(clients) for _ in range(rng.randint(1, 6))]
            rows = [(("", c) if rng.random() < 0.3 else (u, c)) for u, c in rows]
            values = [rng.choice([1, 100, 1000]) for _ in rows]
            a = old.record_remote_rows([u for u, _ in rows], [c for _, c in rows], values, now)
            b = new.record_remote_rows([u for u, _ in rows], [c for _, c in rows], values, now)
        elif op < 0.76:
            if rng.random() < 0.1:
                table = make_table(rng, shape)
            else:
                table = change(rng, table, shape)
            if view is not None and rng.random() < 0.2:  # volume usage moved the factor
                view = (rng.choice([0.1, 0.5, 1.0]), view[1])
            quotas = table if view is None else ScaledProduceQuotas(table, *view)
            old.update_quotas(OldTable(quotas))
            new.update_quotas(quotas)
            a = b = None
        elif op < 0.78:
            smoothing = not smoothing
            old.smoothing = new.smoothing = smoothing
            a = b = None
        elif op < 0.80:
            limit = rng.choice([None, 1, 3])
            a = old.expire_idle_sensors(now, limit)
            b = new.expire_idle_sensors(now, limit)
        else:
            a = (old.stats_for(user, client_id, now), len(old))
            b = (new.stats_for(user, client_id, now), len(new))
        a, b = plain(a), plain(b)
        if a != b:
            raise AssertionError(f"seed {seed} step {step} ({shape}): {user!r}, {client_id!r}: old {a!r}, new {b!r}")
        if step % 50 == 0 or step == steps - 1:
            assert stats(old, now) == stats(new, now), f"seed {seed} step {step} ({shape}): stats differ"
        compared += 1
        dt = rng.choice(
            [0, 0, 1, 10, 100, 500, 1000, 5000, expiration // 2 + 1] if rng.random() < 0.98 else [expiration + 1]
        )
        clocks[0].advance(dt)
        clocks[1].advance(dt)
    return shape, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="442f841", help="the revision to compare against (default: before the change)")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    args = parser.parse_args()
    old_module = load_old(args.old)
    by_shape: dict[str, list[int]] = {}
    for run in range(args.runs):
        shape, compared = one_run(old_module, args.seed + run, args.steps)
        by_shape.setdefault(shape, []).append(compared)
    total = sum(sum(v) for v in by_shape.values())
    print(
        f"{args.runs} runs, {total:,} operations against {args.old}: identical "
        f"({', '.join(f'{shape}: {len(v)} runs' for shape, v in sorted(by_shape.items()))})"
    )


if __name__ == "__main__":
    main()
