"""Differential run of the producer-id quota against an older revision of it: the same random operations on both,
every decision and every stat compared.

The old ``quota/managers/producer_ids.py`` and ``quota/managers/producer_id_cache.py`` are read from git (``--old``, default the
revision before the exact-then-bits cache) and loaded beside the current ones; everything else they import is the
current tree's. Operations: Produce decisions (known, new and repeated PIDs of named users, default-quota users and
users without a quota, ``hold`` and ``throttle``, shadow entries), peers' counts (``record_remote``), abandoned holds,
cleanups (whole and in batches), quota changes (a named user's, the default's, a shadow flag, a removal) and stats,
with the clock moving by steps from 0 to a window. Where the old bloom filters took a new PID for a known one (a
false positive), the new cache (exact while small) counts it: that run stops there and is reported as such; every
other difference is an error.

Usage: ``python bench/producer_id_differential.py [--old 6a7cb16] [--runs 300] [--steps 2000]``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import types
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from quota.managers import producer_ids as new_module  # noqa: E402
from quota.primitives.entity import QuotaEntity, QuotaEntry, QuotaTags  # noqa: E402
from quota.primitives.quota_table import QuotaTable  # noqa: E402

MOVED = {"quota.sharing.usage_tap": "quota.primitives.usage_tap"}
"""Modules of the current tree an old revision imports under an earlier name."""


def load_old(revision: str) -> types.ModuleType:
    def source(path: str) -> str:
        text = subprocess.run(
            ["git", "-C", ROOT, "show", f"{revision}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        for old, new in MOVED.items():
            text = text.replace(old, new)
        return text

    cache = types.ModuleType("old_producer_id_cache")
    exec(compile(source("quota/managers/producer_id_cache.py"), "old_producer_id_cache", "exec"), cache.__dict__)
    cache.BloomFilter = type("BloomFilter", (_Keys, cache.BloomFilter), {})  # with a __dict__ for its keys
    sys.modules["old_producer_id_cache"] = cache
    text = source("quota/managers/producer_ids.py").replace(
        "from quota.managers.producer_id_cache import", "from old_producer_id_cache import"
    )
    try:  # the hold bookkeeping has its own module since the one that split it out
        holds_text = source("quota/managers/producer_id_holds.py")
    except subprocess.CalledProcessError:
        holds_text = None
    if holds_text is not None:
        holds = types.ModuleType("old_producer_id_holds")
        sys.modules["old_producer_id_holds"] = holds
        exec(compile(holds_text, "old_producer_id_holds", "exec"), holds.__dict__)
        text = text.replace("from quota.managers.producer_id_holds import", "from old_producer_id_holds import")
    module = types.ModuleType("old_producer_ids")
    sys.modules["old_producer_ids"] = module
    exec(compile(text, "old_producer_ids", "exec"), module.__dict__)
    return module


class _Keys:
    """Mixed into the old BloomFilter: remembers the keys given, so that a false positive can be told apart."""

    def add(self, key, positions=None):
        super().add(key, positions)
        self.__dict__.setdefault("keys", set()).add(key)


def old_false_positive(manager, user: str, pid: int) -> bool:
    """Whether a filter of ``user``'s old cache has every bit of ``pid`` without having been given it (checked before
    a decision): then a difference is the old filter's false positive, not an error."""
    resolved = manager._quotas.resolve("producer_ids_rate", user, "")
    state = manager._users.get(QuotaTags(resolved.tags.user, ""))
    if state is None:
        return False
    return any(f.has(f.positions(pid)) and pid not in f.__dict__.get("keys", ()) for _, f in state.cache.filters)


def table(rng: random.Random, users: list[str]) -> QuotaTable:
    values = []
    for user in users[:4]:
        if rng.random() < 0.8:
            values.append(({"user": user}, {"producer_ids_rate": rng.choice([0, 1, 3, 10, 1000])}, rng.random() < 0.2))
    if rng.random() < 0.7:
        values.append(({"user": "<default>"}, {"producer_ids_rate": rng.choice([1, 5, 100])}, rng.random() < 0.2))
    return QuotaTable.from_values(values)


def change(rng: random.Random, quotas: QuotaTable, users: list[str]) -> QuotaTable:
    entity = QuotaEntity(rng.choice(users[:5] + ["<default>"]), None)
    if rng.random() < 0.25:
        return quotas.with_changes({entity: None})
    return quotas.with_changes(
        {entity: QuotaEntry(entity, {"producer_ids_rate": rng.choice([0, 2, 4, 50])}, rng.random() < 0.3)}
    )


def stats(manager, now: int) -> list:
    return sorted(manager.stats(now), key=lambda s: s.tags)


def run(old_module, seed: int, steps: int) -> tuple[str, int]:
    rng = random.Random(seed)
    users = [f"u{i}" for i in range(rng.choice([3, 8, 20]))]
    window_s = rng.choice([1, 10, 3600])
    kw = dict(
        window_num=rng.choice([1, 2, 11]),
        window_size_s=window_s,
        expected_pids=rng.choice([1000, 20, 5]),
        false_positive_rate=rng.choice([0.001, 0.05]),
        max_mute_ms=rng.choice([25_000, 2**31 - 1]),
        shadow=rng.random() < 0.1,
        enforcement=rng.choice(["hold", "throttle"]),
        max_hold_ms=rng.choice([0, 1_000, 10_000]),
    )
    quotas = table(rng, users)
    old, new = old_module.ProducerIdQuotaManager(quotas, **kw), new_module.ProducerIdQuotaManager(quotas, **kw)
    pids = [rng.randrange(1 << 62) for _ in range(rng.choice([5, 50, 500]))]
    holds: list[tuple] = []
    now = 1_000
    window_ms = window_s * 1000
    for step in range(steps):
        now += rng.choice([0, 0, 1, 7, window_ms // 16, window_ms // 2, window_ms])
        op = rng.random()
        if op < 0.7:
            user, pid = rng.choice(users), rng.choice(pids)
            if old_false_positive(old, user, pid):  # the old cache would take it for known: the new one may not
                return "stopped at an old false positive", step
            a, b = old.record_and_decide(user, pid, now), new.record_and_decide(user, pid, now)
            if repr(a) != repr(b):  # each module has its own Hold and Refuse classes: their reprs name every field
                raise AssertionError(f"seed {seed} step {step}: {user} {pid}: old {a!r}, new {b!r}")
            if type(a).__name__ == "Hold":
                holds.append((a, b, pid))
        elif op < 0.76:
            user = rng.choice(users)
            some = tuple(rng.sample(pids, rng.choice([0, 1, 3])))
            count = rng.choice([len(some), -1, 2])
            if any(old_false_positive(old, user, p) for p in some):
                return "stopped at an old false positive", step
            old.record_remote(user, count, some, now)
            new.record_remote(user, count, some, now)
        elif op < 0.82 and holds:
            a, b, pid = holds.pop(rng.randrange(len(holds)))
            old.abandon(a, pid, now)
            new.abandon(b, pid, now)
        elif op < 0.9:
            limit = rng.choice([None, 1, 2])
            assert old.cleanup(now, limit) == new.cleanup(now, limit), (seed, step)
            assert len(old) == len(new)
        elif op < 0.95:
            quotas = change(rng, quotas, users)
            old.update_quotas(quotas)
            new.update_quotas(quotas)
        else:
            so, sn = stats(old, now), stats(new, now)
            assert [repr(replace(s, cache_bytes=0)) for s in so] == [repr(replace(s, cache_bytes=0)) for s in sn], (
                seed,
                step,
            )
            assert old.new_pids_counted == new.new_pids_counted
    return "identical", steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="6a7cb16")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    old_module = load_old(args.old)
    outcomes: dict[str, int] = {}
    decided = 0
    for seed in range(args.runs):
        outcome, steps = run(old_module, seed, args.steps)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        decided += steps
    print(
        f"{args.runs} runs against {args.old}, {decided:,} operations: "
        + ", ".join(f"{n} {what}" for what, n in sorted(outcomes.items()))
    )


if __name__ == "__main__":
    main()
