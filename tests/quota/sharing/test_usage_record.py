"""A sidecar's usage record of bounded size (quota.sharing.usage_record, quota.sharing.usage_gathered.Gathered): what does not fit in
one record waits for the next, ranked by the share of its quota it used; nothing is dropped."""

from __future__ import annotations

import pytest

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, QuotaTags
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.remote_usage import record_remote_steps
from quota.sharing.usage_encoding import decode
from quota.sharing.usage_record import fit
from quota.sharing.usage_share import UsageTap


def test_a_record_too_long_sends_the_largest_shares_and_carries_the_rest_until_all_is_sent():
    tap = UsageTap()
    for i in range(3000):
        tap.add(PRODUCER_BYTE_RATE, QuotaTags(f"user-{i:05d}", ""), f"user-{i:05d}", f"client-{i}", 10 + i, 10_000)
    sent: dict[str, float] = {}
    hint, leftover = None, []
    for sync in range(20):
        gathered = tap.gather("a")
        fitted = fit(gathered, 8192, hint, leftover)
        assert len(fitted.data) <= 8192 and sorted(decode(fitted.data).produce) == sorted(fitted.delta.produce)
        hint, leftover = fitted.bytes_per_entry, fitted.leftover
        if sync == 0:
            assert 0 < fitted.sent < 3000 and fitted.encodings >= 2
            assert {u for u, _, _ in fitted.delta.produce} == {f"user-{i:05d}" for i in range(3000 - fitted.sent, 3000)}
        elif fitted.carried:
            assert fitted.encodings <= 2  # the guess from the last record is close
        for user, _, value in fitted.delta.produce:
            sent[user] = sent.get(user, 0) + value
        if fitted.delta.empty:
            break
    else:
        pytest.fail("some usage never sent")
    assert sent == {f"user-{i:05d}": 10 + i for i in range(3000)}  # every byte, once


def test_usage_recorded_while_an_entry_waits_is_added_to_it_and_tokens_rank_first():
    tap = UsageTap()
    tags = QuotaTags("small", "")
    tap.add(PRODUCER_BYTE_RATE, QuotaTags("big", ""), "big", "p", 900, 1000)  # 90 % of its quota
    tap.add(CONSUMER_BYTE_RATE, tags, "small", "c", 10, 1000)
    tap.add(CONTROLLER_MUTATION_RATE, QuotaTags("admin", ""), "admin", "x", 1)
    tap.producer_id("pids", 7)
    gathered = tap.gather("a")
    assert [key for key, _, _ in gathered.ranked()] == [
        None,
        CONTROLLER_MUTATION_RATE,
        PRODUCER_BYTE_RATE,
        CONSUMER_BYTE_RATE,
    ]
    top = gathered.top(3)
    assert top.producer_ids == (("pids", 1, (7,)),) and top.fetch == () and len(top.produce) == 1
    tap.add(CONSUMER_BYTE_RATE, tags, "small", "c", 5, 1000)
    later = tap.gather("a")
    later.absorb(gathered.leftover(3))
    assert later.top().fetch == (("small", "", 15),)


def test_a_peers_record_is_recorded_in_steps_reading_the_clock_at_each():
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"user": "<default>"}, {PRODUCER_BYTE_RATE: 1000})])
    manager = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, QuotaWindow(11, 1))
    manager.tap = UsageTap()
    for i in range(5):
        manager.record_no_throttle(f"u{i}", "p", 100)
    delta = manager.tap.take("b")
    receiver = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, QuotaWindow(11, 1))
    reads = []

    def now():
        reads.append(clock.now_ms())
        return clock.now_ms()

    steps = record_remote_steps(
        delta, now, produce=receiver, fetch=None, mutations=None, producer_ids=None, connections=None, step=2
    )
    assert next(steps) == 2 and len(receiver) == 2
    clock.advance(5)
    assert list(steps) == [4, 5] and len(receiver) == 5
    assert reads == [0, 5, 5]


def test_a_record_rounds_byte_counts_to_two_digits_and_sends_the_rest_next_time():
    tap = UsageTap()
    tap.add(PRODUCER_BYTE_RATE, QuotaTags("a", ""), "a", "p", 1_234_567, 10**7)
    tap.add(CONSUMER_BYTE_RATE, QuotaTags("b", ""), "b", "p", 99, 10**7)
    tap.add(CONTROLLER_MUTATION_RATE, QuotaTags("c", ""), "c", "p", 1234)  # tokens: exact
    gathered = tap.gather("s")
    delta = gathered.top(coarse=True)
    assert (delta.produce, delta.fetch, delta.mutations) == (
        (("a", "", 1_200_000),),
        (("b", "", 99),),
        (("c", "", 1234),),
    )
    later = tap.gather("s")
    later.absorb(gathered.leftover(gathered.entities))
    assert later.top().produce == (("a", "", 34_567),)


class Recorded:
    """What a peer's record was taken into, and at which time: ``(kind, rows or entry, now_ms)`` in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def sink(self, kind: str):
        calls = self.calls

        class Sink:
            def record_remote_rows(self, users, client_ids, values, now_ms):
                calls.append((kind, list(zip(users, client_ids, values)), now_ms))

            def record_remote(self, *entry_and_now, peer):  # the peer: what it gives back is judged by it
                calls.append((kind, entry_and_now[:-1], entry_and_now[-1]))

        return Sink()


def test_every_kind_of_a_peers_record_counts_toward_the_steps_and_is_recorded_at_its_steps_time():
    from quota.sharing.usage_delta import UsageDelta

    delta = UsageDelta(
        "peer",
        produce=(("a", "", 1), ("b", "", 2), ("c", "", 3)),
        fetch=(("d", "", 4), ("e", "", 5)),
        mutations=(("f", "x", 6), ("g", "y", 7), ("h", "z", 8)),
        producer_ids=(("i", 1, (10,)), ("j", 2, (11, 12))),
    )
    clock = ManualClock(0)
    recorded = Recorded()
    steps = record_remote_steps(
        delta,
        clock.now_ms,
        produce=recorded.sink("produce"),
        fetch=recorded.sink("fetch"),
        mutations=recorded.sink("mutations"),
        producer_ids=recorded.sink("producer_ids"),
        connections=None,
        step=2,
    )
    done = []
    for n in steps:  # the clock moves while the caller has the step
        done.append(n)
        clock.advance(10)
    assert done == [2, 4, 6, 8, 10, 10]  # a yield at each step across kinds, then the end
    assert recorded.calls == [
        ("produce", [("a", "", 1), ("b", "", 2)], 0),
        ("produce", [("c", "", 3)], 10),  # a step ends across two kinds: one row of each
        ("fetch", [("d", "", 4)], 10),
        ("fetch", [("e", "", 5)], 20),
        ("mutations", ("f", "x", 6), 20),
        ("mutations", ("g", "y", 7), 30),
        ("mutations", ("h", "z", 8), 30),
        ("producer_ids", ("i", 1, (10,)), 40),
        ("producer_ids", ("j", 2, (11, 12)), 40),
    ]
    recorded.calls.clear()
    assert list(
        record_remote_steps(
            delta,
            clock.now_ms,
            produce=recorded.sink("produce"),
            fetch=recorded.sink("fetch"),
            mutations=recorded.sink("mutations"),
            producer_ids=recorded.sink("producer_ids"),
            connections=None,
            step=None,
        )
    ) == [10]
    assert [c[0] for c in recorded.calls] == ["produce", "fetch"] + ["mutations"] * 3 + ["producer_ids"] * 2
