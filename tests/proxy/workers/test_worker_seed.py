"""A restarted worker starts from a peer's quota rates (issue 35): a new worker's sensors were empty, so it gave a
tenant already at its quota a fresh sensor's allowance (quota x (window.num - 1) windows) and the tenant got
1.27-1.30 x its quota for about a window span after a worker restart. Now the parent asks a serving worker for its
byte-rate sensors' samples (they hold every worker's usage) and passes them to the newcomer alone, which then decides
as the others do. Two links on socket pairs, the test standing in for the parent; managers on a fake clock."""

from __future__ import annotations

import asyncio
import json
import socket

from proxy.workers.frames import SEED, SEED_ASK, pack, read_frame
from proxy.workers.link import WorkerLink
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.rate import QuotaWindow, Rate
from tests.proxy.fake_app import FakeApp

RAW = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
    "settings": {"workers": 2},
    "quotas": [
        {
            "entity": {"client-id": "spread"},
            "producer_byte_rate": 1000,
            "consumer_byte_rate": 1000,
            "controller_mutation_rate": 1,
        },
        {"entity": {"user": "<default>"}, "producer_ids_rate": 2, "request_rate": 5},
        {"entity": {"group": "<default>"}, "request_rate": 2},
        {"entity": {"topic": "orders"}, "producer_byte_rate": 1000, "consumer_byte_rate": 1000, "on_exceed": "reject"},
    ],
}


def test_a_seeded_rate_measures_what_the_original_measures_from_then_on():
    window = QuotaWindow(11, 1)
    original, copy = Rate(window), Rate(window)
    for t in range(0, 15_000, 250):
        original.record(250.0, 1_000_000 + t)
    now = 1_015_000
    copy.seed(original.samples(now), now)
    for t in range(now, now + 15_000, 500):
        assert copy.measure(t) == original.measure(t)
        original.record(100.0, t)
        copy.record(100.0, t)


def test_a_rate_that_recorded_already_takes_the_seeds_sum_at_once():
    window = QuotaWindow(11, 1)
    original, busy = Rate(window), Rate(window)
    original.record(5000.0, 1_000_000)
    busy.record(1000.0, 1_002_000)
    busy.seed(original.samples(1_002_000), 1_002_000)
    assert busy.total(1_002_000) == 6000.0


def test_a_restarted_worker_decides_as_the_serving_one_from_its_first_request():
    async def run():
        clock = ManualClock(1_000_000)
        survivor, newcomer = FakeApp(clock, RAW), FakeApp(clock, RAW)
        for _ in range(10):  # a tenant at its quota for 10 s, spread over the workers (here all recorded by one)
            survivor.quotas.produce.record_no_throttle("", "spread", 1000)
            survivor.quotas.fetch.record_no_throttle("", "spread", 1000)
            survivor.quotas.topics.produce.record_no_throttle("", "orders", 1000)
            survivor.quotas.topics.fetch.record_no_throttle("", "orders", 1000)
            for _ in range(5):  # the user's and the group's request rates at their quotas too
                survivor.quotas.requests.record_client("tenant", "app")
            for _ in range(2):
                survivor.quotas.requests.record_group("storm")
            clock.advance(1000)
        survivor.quotas.mutations.admit("", "spread", [15])  # past its burst of 11: tokens below 0
        for pid in range(30):  # the user's burst of new producer ids (2 x 11 windows) and more
            survivor.quotas.producer_ids.record_and_decide("tenant", pid, clock.now_ms())
        s_ours, s_parent = socket.socketpair()
        n_ours, n_parent = socket.socketpair()
        s = WorkerLink(survivor, 0, s_ours, 10_000, lambda: None)
        n = WorkerLink(newcomer, 1, n_ours, 10_000, lambda: None)
        await s.start()
        await n.start()
        reader, writer = await asyncio.open_unix_connection(sock=s_parent)
        _, to_newcomer = await asyncio.open_unix_connection(sock=n_parent)
        writer.write(pack(SEED_ASK, b"1"))
        parts = []
        while not parts or not parts[-1].get("last"):  # the parent's part: each SEED passed on to the newcomer
            kind, payload = await asyncio.wait_for(read_frame(reader), 10)
            if kind == SEED:
                assert payload.startswith(b"1\n")
                parts.append(json.loads(payload.split(b"\n", 1)[1]))
                to_newcomer.write(pack(SEED, payload))
        assert [row[:2] for part in parts for row in part.get("produce", ())] == [["", "spread"]]
        assert [row[0] for part in parts for row in part.get("producer_ids", ())] == ["tenant"]
        for _ in range(500):
            if newcomer.quotas.requests.groups.stats(clock.now_ms()):  # the last part's kind but one: all taken by then
                break
            await asyncio.sleep(0.01)
        now = clock.now_ms()
        for manager in ("produce", "fetch"):
            mine = getattr(newcomer.quotas, manager)
            theirs = getattr(survivor.quotas, manager)
            assert mine.stats_for("", "spread", now).rate == theirs.stats_for("", "spread", now).rate > 900
            assert mine.stats_for("", "spread", now).value_total == 0  # the peer's usage, not this worker's own
            expected = theirs.record_and_get_throttle_time_ms("", "spread", 2000, now)
            assert expected > 0  # before the fix the newcomer gave 0: a fresh sensor's 10 s allowance
            assert mine.record_and_get_throttle_time_ms("", "spread", 2000, now) == expected
        for kind in ("produce", "fetch"):  # the topic quotas' sensors too: a topic at its quota stays at it
            mine, theirs = getattr(newcomer.quotas.topics, kind), getattr(survivor.quotas.topics, kind)
            assert mine.stats_for_topic("orders", now).rate == theirs.stats_for_topic("orders", now).rate > 900
        assert newcomer.quotas.topics.produce.admit("orders", [500, 500], now) == (False, False)  # before: admitted
        for kind, user, name in (("clients", "tenant", "other-app"), ("groups", "", "storm")):  # request rates too
            mine, theirs = getattr(newcomer.quotas.requests, kind), getattr(survivor.quotas.requests, kind)
            assert mine.stats_for(user, name, now).rate == theirs.stats_for(user, name, now).rate > 1.5
        requests = [w.quotas.requests for w in (survivor, newcomer)]
        assert [isinstance(r.record_client("tenant", "more", now), Throttle) for r in requests] == [True, True]
        assert [isinstance(r.record_group("storm", now), Throttle) for r in requests] == [True, True]
        mutations = [w.quotas.mutations.admit("", "spread", [1], now) for w in (survivor, newcomer)]
        assert mutations[0].throttle is not None and mutations[1] == mutations[0]  # before: a full bucket of 11
        pids = [w.quotas.producer_ids.record_and_decide("tenant", 99, now) for w in (survivor, newcomer)]
        assert pids[0] != FORWARD and pids[1] == pids[0]  # before: FORWARD, a full bucket of 22
        assert newcomer.quotas.producer_ids.record_and_decide("tenant", 3, now) == FORWARD  # known: not charged
        await s.close()
        await n.close()
        for sock in (s_parent, n_parent):
            sock.close()

    asyncio.run(run())


def test_a_seed_that_cannot_be_read_is_dropped_and_the_link_keeps_working():
    """A peer's state that does not parse is logged and the newcomer starts afresh; the link still reads the next
    frames (before, the read loop died on it and the worker heard nothing from the parent any more)."""

    async def run():
        clock = ManualClock(1_000_000)
        survivor, newcomer = FakeApp(clock, RAW), FakeApp(clock, RAW)
        survivor.quotas.produce.record_no_throttle("", "spread", 5000)
        n_ours, n_parent = socket.socketpair()
        n = WorkerLink(newcomer, 1, n_ours, 10_000, lambda: None)
        await n.start()
        _, to_newcomer = await asyncio.open_unix_connection(sock=n_parent)
        for bad in (
            b"1\n{not json",
            b"1\n[1, 2]",
            b"1\n" + json.dumps({"mutation": [["", "spread"]]}).encode(),
            b"no destination",
        ):
            to_newcomer.write(pack(SEED, bad))
        good = {"produce": survivor.quotas.produce.seed_rows(clock.now_ms(), 10)}
        to_newcomer.write(pack(SEED, b"1\n" + json.dumps(good).encode()))
        for _ in range(500):
            if newcomer.quotas.produce.stats_for("", "spread") is not None:
                break
            await asyncio.sleep(0.01)
        assert (
            newcomer.quotas.produce.stats_for("", "spread", clock.now_ms()).rate
            == survivor.quotas.produce.stats_for("", "spread", clock.now_ms()).rate
            > 0
        )
        await n.close()
        n_parent.close()

    asyncio.run(run())
