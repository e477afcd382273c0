"""The bounded views metrics take of many entities (quota/primitives/top.py): the busiest n - 1 and the rest, read a chunk at a
time with a pause between chunks (where the scrape thread lets the event loop run)."""

from collections import OrderedDict

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.top import CHUNK, busiest, others, release, snapshot


class Item:
    def __init__(self, value: int) -> None:
        self.value = value


def key(item: Item) -> int:
    return item.value


def test_few_items_are_each_their_own():
    items = [Item(v) for v in (3, 1, 2)]
    assert busiest(items, 3, key) is None


def test_the_busiest_and_the_others_partition_the_items():
    items = [Item((v * 7919) % 10_007) for v in range(3 * CHUNK + 5)]
    top = busiest(items, 10, key)
    assert sorted(i.value for i in top) == sorted(i.value for i in items)[-9:]
    rest = [i for part in others(items, top) for i in part]
    assert len(rest) + len(top) == len(items) and not set(map(id, rest)) & set(map(id, top))


def test_work_pauses_between_chunks():
    pauses = []
    items = [Item(v) for v in range(10 * CHUNK)]
    top = busiest(items, 5, key, pause=lambda: pauses.append("busiest"))
    list(others(items, top, pause=lambda: pauses.append("others")))
    release(items, pause=lambda: pauses.append("release"))
    assert items == []
    assert [pauses.count(p) for p in ("busiest", "others", "release")] == [9, 9, 9]


def test_snapshot_copies_an_ordered_dict_s_values():
    table = OrderedDict((k, Item(k)) for k in range(5))
    table.move_to_end(0)
    assert sorted(i.value for i in snapshot(table)) == [0, 1, 2, 3, 4]


def test_a_manager_s_top_stats_pause_between_chunks_of_its_sensors():
    m = ClientQuotaManager(
        QuotaTable.from_values([({"client-id": "<default>"}, {PRODUCER_BYTE_RATE: 10**9})]),
        PRODUCER_BYTE_RATE,
        ManualClock(1_000_000),
    )
    for i in range(4 * CHUNK):
        m.record_and_decide("u", f"c{i}", i)
    pauses = []
    top, other = m.top_stats(10, pause=lambda: pauses.append(1))
    assert len(top) == 9 and other.value_total == sum(range(4 * CHUNK - 9))
    assert len(pauses) >= 3 * 3  # selection, the others' sums and the snapshot's release, 4 chunks each
