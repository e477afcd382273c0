"""The config-topic follower's work is linear in what the records change, not in what is in force: counted (the
values checked, the states put in force), never timed. The follower (proxy.observers.dynamic_config.DynamicConfig._read) runs on a
scripted consumer and reader (lists of records; no broker: what is counted is the proxy's own work per record)."""

from __future__ import annotations

import asyncio
import json
from collections import namedtuple

import pytest

import quota.primitives.quota_table
from config.dynamic import entity_key
from config.loader import parse_config
from config.model import Address
from proxy.cluster.kafka_clients import OwnKafka
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.observers.dynamic_config import DynamicConfig
from quota.primitives.quota_table import QuotaTable

Record = namedtuple("Record", "key value")
TP = ("__kafka_quota_proxy_configs", 0)


def rec(user: str, rate: int | None) -> Record:
    return Record(
        entity_key({"user": user}), None if rate is None else json.dumps({"producer_byte_rate": rate}).encode()
    )


class ScriptedTopic:
    """aiokafka's consumer and proxy.observers.following.TopicReader, as far as _read uses them: polls handed out in order."""

    def __init__(self, polls: list[list[Record]]) -> None:
        self.polls = list(polls)
        self.end = sum(map(len, polls))  # what the topic holds when the read starts
        self.position = 0
        self.more = asyncio.Event()
        self.answered = True

    def add(self, records: list[Record]) -> None:
        self.polls.append(records)
        self.more.set()

    async def getmany(self, timeout_ms: int = 0, max_records: int | None = None):
        if not self.polls:
            self.more.clear()
            try:
                await asyncio.wait_for(self.more.wait(), timeout_ms / 1000)
            except TimeoutError:
                return {}
        records = self.polls.pop(0)
        self.position += len(records)
        return {TP: records}

    def highwater(self, tp) -> int:
        return self.position + sum(map(len, self.polls))

    async def end_offsets(self):
        return {TP: self.end}

    async def positions(self):
        return {TP: self.position}

    async def changed(self):
        return None


class Counting:
    """Counts the quota values checked (quota.primitives.quota_table._check_value: once per key of each entry a table takes)."""

    def __init__(self, monkeypatch) -> None:
        self.checks = 0
        original = quota.primitives.quota_table._check_value

        def counted(*args):
            self.checks += 1
            return original(*args)

        monkeypatch.setattr(quota.primitives.quota_table, "_check_value", counted)
        self.resolves = 0
        resolve, limit = QuotaTable.resolve, QuotaTable.limit

        def counted_resolve(table, *args):
            self.resolves += 1
            return resolve(table, *args)

        def counted_limit(table, *args):
            self.resolves += 1
            return limit(table, *args)

        monkeypatch.setattr(QuotaTable, "resolve", counted_resolve)
        monkeypatch.setattr(QuotaTable, "limit", counted_limit)


class Following:
    """The follower running on a scripted topic, for the length of a ``with``."""

    def __init__(self, topic: ScriptedTopic, dynamic: DynamicConfig) -> None:
        self.topic, self.dynamic = topic, dynamic

    async def __aenter__(self) -> Following:
        self.task = asyncio.get_running_loop().create_task(self.dynamic._read(self.topic, self.topic))
        return self

    async def until(self, predicate) -> None:
        while not predicate():  # bounded by the test's timeout
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.001)

    async def __aexit__(self, *exc) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


BASE = parse_config(
    {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [{"name": "L", "bind": "127.0.0.1:0"}],
        "dynamic_config": {},
        "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": 1}],
    }
)
N = 600
UNUSED = OwnKafka((Address("unused", 9092),))  # the follower runs on a scripted topic: nothing is asked of it


@pytest.mark.timeout(60)
def test_work_per_record_does_not_grow_with_the_entries_in_force(monkeypatch):
    applied = []
    dynamic = DynamicConfig(BASE, applied.append, UNUSED)
    counting = Counting(monkeypatch)
    topic = ScriptedTopic(
        [[rec(f"user-{i}", 1000 + i) for i in range(start, start + 100)] for start in range(0, N, 100)]
    )

    async def run():
        async with Following(topic, dynamic) as following:
            # start-up: the whole topic, put in force once, at the end
            await following.until(lambda: dynamic.caught_up.is_set())
            assert len(applied) == 1 and len(applied[0].quotas) == N + 1
            assert counting.checks <= 3 * (N + 1)  # each entry's value checked a bounded number of times (was N^2/2)

            # one more poll of three records, against N entries in force: three entries' worth of work, one swap
            counting.checks = 0
            topic.add([rec("user-1", 7), rec("new", 8), rec("user-2", None)])
            await following.until(lambda: len(applied) == 2)
            assert counting.checks <= 3 * 3
        config = applied[1]
        assert config.quotas.limit("producer_byte_rate", "user-1", "x") == 7
        assert config.quotas.limit("producer_byte_rate", "new", "x") == 8
        assert config.quotas.limit("producer_byte_rate", "user-2", "x") == 1  # back to <default>
        assert config.quotas.limit("producer_byte_rate", "user-3", "x") == 1003

    asyncio.run(run())


def test_a_poll_is_put_in_force_in_one_swap():
    applied = []
    dynamic = DynamicConfig(BASE, applied.append, UNUSED)
    topic = ScriptedTopic([[rec("seed", 1)]])

    async def run():
        async with Following(topic, dynamic) as following:
            await following.until(lambda: dynamic.caught_up.is_set())
            topic.add([rec(f"user-{i}", 10 + i) for i in range(300)] + [rec("user-0", None)])
            await following.until(lambda: len(applied) == 2)
            await asyncio.sleep(0.05)
        assert len(applied) == 2  # the poll's 301 records: one configuration, every record in it
        assert applied[1].quotas.limit("producer_byte_rate", "user-299", "x") == 309
        assert applied[1].quotas.limit("producer_byte_rate", "user-0", "x") == 1

    asyncio.run(run())


def test_a_swap_refreshes_only_the_sensors_the_changed_entities_reach(monkeypatch):
    """Every tenant has live sensors (produce, fetch, producer ids): a poll changing three of them re-resolves
    those, not every sensor of every manager."""
    quotas = ProxyQuotas(BASE)
    applied = []
    dynamic = DynamicConfig(BASE, lambda config: (applied.append(config), quotas.apply(config)), UNUSED)
    counting = Counting(monkeypatch)
    topic = ScriptedTopic([[rec(f"user-{i}", 1000 + i) for i in range(N)]])

    async def run():
        async with Following(topic, dynamic) as following:
            await following.until(lambda: dynamic.caught_up.is_set())
            for i in range(N):
                quotas.produce.record_and_decide(f"user-{i}", "c", 10)
                quotas.fetch.record_and_decide(f"user-{i}", "c", 10)
            counting.resolves = 0
            topic.add([rec("user-1", 7), rec("new", 8), rec("user-2", None)])
            await following.until(lambda: len(applied) == 2)
            assert counting.resolves <= 2 * 3 * 3  # a few per changed entity and manager (was 2 per sensor: 2,400)
        stats = {s.tags.user: s.limit for s in quotas.produce.stats()}
        assert stats["user-1"] == 7 and stats["user-2"] == 1 and stats["user-3"] == 1003  # refreshed, or kept

    asyncio.run(run())


def test_the_start_up_read_is_not_held_once_in_force(monkeypatch):
    """The batch of the start-up read (every record of the topic, and the state it made) is let go once put in
    force; before, the follower held it as long as it ran, so once every entry had been rewritten the proxy held
    the whole configuration twice (10^5 entries, start-up then every entry rewritten: 377 MiB RSS, now 242)."""
    import weakref

    import proxy.observers.dynamic_config
    from config.dynamic_state import Batch

    made = []

    class Tracked(Batch):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(weakref.ref(self))

    monkeypatch.setattr(proxy.observers.dynamic_config, "Batch", Tracked)
    applied = []
    dynamic = DynamicConfig(BASE, applied.append, UNUSED)
    topic = ScriptedTopic(
        [[rec(f"user-{i}", 1000 + i) for i in range(start, start + 100)] for start in range(0, N, 100)]
    )

    async def run():
        async with Following(topic, dynamic) as following:
            await following.until(lambda: dynamic.caught_up.is_set())
            topic.add([rec("user-1", 7)])
            await following.until(lambda: len(applied) == 2)
            assert made[0]() is None  # the start-up read's batch: gone
            assert len(dynamic.entries.entries) == N

    asyncio.run(run())


def test_polls_that_follow_at_once_while_behind_are_one_batch(monkeypatch):
    """A burst: five polls already in the topic when the follower gets to them. While behind, the polls that
    follow at once join the batch (up to CATCH_UP_RECORDS keys), so the maps underneath are copied once per batch,
    not once per poll (a poll of 2,000 keys over 10^5 entries copies nearly every chunk). Before: five swaps."""
    import proxy.observers.dynamic_config

    monkeypatch.setattr(proxy.observers.dynamic_config, "CATCH_UP_RECORDS", 250, raising=False)
    applied = []
    dynamic = DynamicConfig(BASE, applied.append, UNUSED)
    topic = ScriptedTopic([[rec("seed", 1)]])

    async def run():
        async with Following(topic, dynamic) as following:
            await following.until(lambda: dynamic.caught_up.is_set())
            swaps = dynamic.swaps
            for start in range(0, 500, 100):
                topic.polls.append([rec(f"user-{i}", 10 + i) for i in range(start, start + 100)])
            topic.add([])
            # the last batch in force, not only read: ``applied`` counts a batch before its swap is built (under a
            # loaded suite the test saw the count before the second swap)
            await following.until(
                lambda: (
                    dynamic.applied == 501
                    and bool(applied)
                    and applied[-1].quotas.limit("producer_byte_rate", "user-499", "x") == 509
                )
            )
            assert dynamic.swaps - swaps == 2  # 300 keys (the bound reached), then the last 200
        assert applied[-1].quotas.limit("producer_byte_rate", "user-499", "x") == 509

    asyncio.run(run())


def test_start_up_reads_to_the_end_the_first_fetch_answered_when_the_listed_end_is_short():
    """Tansu lists a log's end as its last batch's base offset + 1 (proxy.observers.following.log_end): 101 for a topic of
    103 records whose last batch holds 3. A poll handing over 101 of them was taken for the end: the configuration
    was put in force (and /readyz ready) without the last two entries, then again with them. Now start-up reads to
    the first fetch's high watermark: one swap, every entry."""
    applied = []
    dynamic = DynamicConfig(BASE, applied.append, UNUSED)
    topic = ScriptedTopic(
        [[rec(f"user-{i}", 1000 + i) for i in range(101)], [rec(f"user-{i}", 1000 + i) for i in range(101, 103)]]
    )
    topic.end = 101

    async def run():
        async with Following(topic, dynamic) as following:
            await following.until(lambda: dynamic.caught_up.is_set())
            assert len(applied) == 1 and len(dynamic.entries.entries) == 103

    asyncio.run(run())
