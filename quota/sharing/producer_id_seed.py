"""A restarted worker's producer-id quota starts from a serving peer's (issue 35). Pure.

A worker that starts again would otherwise give every user a full bucket (``producer_ids_rate x
producer.id.quota.window.num`` new ids at once) and forget every id admitted: a tenant in a restart loop of a worker
would gain a burst per restart, and a known producer would be charged again. The peer's state holds every worker's
new ids (their tokens and the ids admitted reach it through the shared usage), so the newcomer takes, for the
busiest users, the peer's tokens (keeping the fewer, never more) and its filters (:meth:`TimeControlledBloomFilter.
export`): exact ones as their ids, bloom filters as their bits.
"""

from __future__ import annotations

import base64
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from quota.managers.producer_id_cache import Filter
from quota.managers.producer_ids import ProducerIdQuotaManager


def seed_rows(manager: ProducerIdQuotaManager, now_ms: int, max_rows: int) -> list[list[Any]]:
    """``[user, tokens, filters]`` for the ``max_rows`` users whose bucket lacks the most (then the most ids
    known), as plain JSON values: an exact filter's PIDs a list of ints, a bloom filter's bits in base64."""
    states = [s for s in manager.states() if s.live or s.bucket.peek(now_ms) < s.bucket.burst]
    if len(states) > max_rows:
        states = sorted(states, key=lambda s: (s.bucket.burst - s.bucket.peek(now_ms), s.count), reverse=True)[
            :max_rows
        ]
    return [
        [s.user, s.bucket.peek(now_ms), [[created, _plain(data), count] for created, data, count in s.export()]]
        for s in states
    ]


def seed(manager: ProducerIdQuotaManager, rows: Iterable[Sequence[Any]], now_ms: int) -> int:
    """A peer's :func:`seed_rows` taken in; returns how many users it reached (a user no quota covers here is
    skipped)."""
    taken = 0
    for user, tokens, filters in rows:
        state = manager.state_for(user, now_ms)
        if state is None:
            continue
        state.bucket.at_most(float(tokens), now_ms)
        state.take([(int(created), _data(data), int(count)) for created, data, count in filters], now_ms)
        taken += 1
    return taken


def _plain(data: Filter) -> list[int] | str:
    return data.tolist() if isinstance(data, array) else base64.b64encode(bytes(data)).decode()


def _data(plain: list[int] | str) -> Filter:
    return array("q", sorted(plain)) if isinstance(plain, list) else bytearray(base64.b64decode(plain))
