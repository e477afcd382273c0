"""Room in a full table of producer-id users (``quota.max.tracked.entities``, issue 44). Pure: ``now_ms`` is passed in.

Past the cap, a new user a quota names only as ``<default>`` still gets a state of its own: room is made by evicting
one, as the byte-rate sensors, the mutation buckets and the per-IP rates do. From the front of the users' table (in
the order they were made or last given a second chance) the first user not asked about since then and holding no id
goes: a flood's one-off users first, idle users next; a user asked about since goes to the back (a second chance, as
the CLOCK algorithm gives), and past :data:`EVICTION_SCAN` of them the front one goes all the same.

What the evicted user had used of its bucket (its *debt*, as the time its rate refills the bucket) is carried in a
decaying count-min sketch (:mod:`quota.primitives.debt_sketch`): a state made again for it (or for a user whose name
collides) starts owing what is left. A state made while the table is full starts with one token besides (at most):
its first new id goes through at once, the next ones at its rate; so a flood of new users gains one id per user and
no burst, and a user gains nothing by being evicted and coming back. Its cache (the ids it used) goes with it: a
producer of an evicted user is counted again when it comes back (stricter, never looser).
"""

from __future__ import annotations

import math

from quota.managers.producer_id_user import ProducerIdUser
from quota.primitives.debt_sketch import DebtSketch

EVICTION_SCAN = 1024
"""Users an eviction looks at from the front for one not asked about since it was made or moved (about a ms)."""

FIRST_TOKENS = 1.0
"""What a state made in a full table holds at most: one new id at once, then the rate (an IP's one connection, a
mutation bucket's one topic)."""


def evict(users: dict[str, ProducerIdUser], debts: DebtSketch, now_ms: int) -> ProducerIdUser | None:
    """Room for one more user in ``users`` (their order: made or last moved): the victim is taken out and its debt
    put in ``debts``; returned (None when ``users`` is empty)."""
    if not users:
        return None
    for _ in range(min(EVICTION_SCAN, len(users))):
        user, front = next(iter(users.items()))
        if front.last_ms <= front.moved_ms and not front.holding:
            break
        users[user] = users.pop(user)  # to the back: a second chance
        front.moved_ms = now_ms
    else:
        user, front = next(iter(users.items()))
    del users[user]
    debts.add(user, paid_off_ms(front, now_ms), now_ms)
    return front


def paid_off_ms(state: ProducerIdUser, now_ms: int) -> float:
    """When ``state``'s bucket is full again: its spent tokens refilled at its rate."""
    bucket = state.bucket
    if math.isinf(bucket.burst) or bucket.rate <= 0:
        return now_ms
    return now_ms + (bucket.burst - bucket.peek(now_ms)) / bucket.rate * 1000.0


def carry(state: ProducerIdUser, remaining_ms: float, full: bool, now_ms: int) -> None:
    """A new ``state`` owes what its rate refills in ``remaining_ms`` (carried from an eviction); made in a full
    table (``full``), it holds at most :data:`FIRST_TOKENS` besides."""
    bucket = state.bucket
    if math.isinf(bucket.burst):
        return
    owed = bucket.rate * remaining_ms / 1000.0
    if full:
        owed = max(owed, bucket.burst - FIRST_TOKENS)
    if owed > 0:
        bucket.take(owed, now_ms)
