"""named_stats on the lines a proxy writes (proxy.ops.usage_log.records): a topic's, a partition's and a group's
counts by label and a client's requests of the APIs request_rate counts, each the busiest proxy's per interval (these
quotas are each proxy's), totals summed over every proxy."""

import json

import pytest

pytest.importorskip("pyspark", reason="the analytics extra (pip install kafka-quota-proxy[analytics]) is not installed")

from analytics import demand, named_stats, stats  # noqa: E402
from analytics.usage_record import FIELDS, record  # noqa: E402
from proxy.codec.apis import JOIN_GROUP, METADATA, PRODUCE  # noqa: E402
from proxy.ops.usage_log import records  # noqa: E402
from proxy.ops.usage_table import UsageCounters  # noqa: E402

DT = 10.0
T0 = 1_795_455_600.0


def counters(requests=0, topic_bytes=None, group_requests=None, partition_bytes=None) -> UsageCounters:
    row = UsageCounters()
    row.requests, row.topic_bytes, row.group_requests = requests, topic_bytes, group_requests
    row.partition_bytes = partition_bytes
    return row


def lines(k: int, proxy: str, share: float) -> list[dict]:
    """What ``proxy`` logs in interval k: ``share`` of the topic's k x 1000 B/s (its partition 3 a fifth of it, the
    partitions of its ``partition: <default>`` entry the rest) and of the group's and the client's k requests/s."""
    written = int(k * 1000 * DT * share)
    partitions = {"orders/3": written // 5, "orders/<default>": written - written // 5}
    rows = {
        ("L", "10.0.0.1", "alice", "etl", PRODUCE, None): counters(1, {"orders": written}, partition_bytes=partitions),
        ("L", "10.0.0.1", "alice", "etl", JOIN_GROUP, None): counters(
            int(k * DT * share), group_requests={"payments": int(k * DT * share)}
        ),
        ("L", "10.0.0.1", "alice", "etl", METADATA, None): counters(0),
    }
    return list(records(rows, T0 + k * DT, DT, proxy=proxy))


def test_the_busiest_proxys_rate_per_interval_and_every_proxys_total(spark, tmp_path):
    written = [
        line for k in range(1, 21) for proxy, share in (("a", 0.75), ("b", 0.25)) for line in lines(k, proxy, share)
    ]
    assert set(written[0]) == set(FIELDS)  # the planner's record is the proxy's line, key for key
    path = tmp_path / "usage.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in written))
    grid = stats.on_grid(stats.read_usage(spark, str(path)))
    rows = {
        (r["topic"] or r["group"] or r["client_id"], r["partition"], r["key"]): r.asDict()
        for r in named_stats.named_stats(named_stats.named_intervals(grid, ("JoinGroup", "Metadata"))).collect()
    }
    partition = rows.pop(("orders", "3", "producer_byte_rate"))  # orders/3: a partition of orders, by its label
    lump = rows.pop(("orders", "<default>", "producer_byte_rate"))
    assert partition["rate_max"] == 3_000.0 and lump["rate_max"] == 12_000.0 and partition["user"] is None
    assert partition["total"] + lump["total"] == sum(k * 10_000 for k in range(1, 21))
    rows = {(entity, key): row for (entity, _, key), row in rows.items()}
    assert set(rows) == {("orders", "producer_byte_rate"), ("payments", "request_rate"), ("etl", "request_rate")}
    # proxy a's 3/4 of k x 1000 B/s, k = 1..20: p99 at rank 18.81 of 19, max 15,000; every byte in the total
    topic = rows[("orders", "producer_byte_rate")]
    assert (topic["rate_max"], topic["total"]) == (15_000.0, sum(k * 10_000 for k in range(1, 21)))
    assert topic["rate_p99"] == pytest.approx(0.75 * (19.81 * 1000))
    assert rows[("payments", "request_rate")]["rate_max"] == rows[("etl", "request_rate")]["rate_max"] == 15.0
    assert rows[("etl", "request_rate")]["user"] == "alice" and rows[("etl", "request_rate")]["topic"] is None


def test_what_a_request_rate_or_a_topic_quota_hid_is_estimated_as_the_python_twins_estimate_it(spark, tmp_path):
    """A client held by its request_rate on its Metadata requests, and a topic whose one producer (of two) its topic
    quota held: held_by says how many requests each hold took (m), so each demand is analytics.demand's on the
    same records: the client's alone, the topic's its producers' parts added up."""
    held = {3: (4, 6_000), 4: (5, 5_000), 6: (10, 10_000), 7: (2, 8_000), 8: (6, 5_000)}  # k: (m, held_ms)
    client, producers, writers = [], {"bob": [], "carol": []}, {"bob": [], "carol": []}  # writers: of orders/3
    written = []
    for k in range(1, 11):
        t = T0 + k * DT
        m, held_ms = held.get(k, (0, 0))
        by = {"request_rate": m} if m else None
        written.append(
            record(t, DT, "L", "10.0.0.1", "alice", "etl", "Metadata", requests=12, held_by=by, throttle_ms=held_ms)
        )
        client.append((DT, 12, 12, m, held_ms))
        by = {"topic_producer_byte_rate": m} if m else None
        written.append(
            record(
                t,
                DT,
                "L",
                "10.0.0.2",
                "bob",
                "p1",
                "Produce",
                requests=10,
                request_bytes=900_000,
                topic_bytes={"orders": 800_000},
                partition_bytes={"orders/3": 200_000},
                held_by=by,
                throttle_ms=held_ms,
            )
        )
        producers["bob"].append((t, DT, 800_000, 10, m, held_ms))
        writers["bob"].append((t, DT, 200_000, 10, m, held_ms))
        written.append(
            record(
                t,
                DT,
                "L",
                "10.0.0.3",
                "carol",
                "p2",
                "Produce",
                requests=10,
                request_bytes=600_000,
                topic_bytes={"orders": 500_000},
                partition_bytes={"orders/3": 100_000},
                throttles=1,
                throttle_ms=0,
            )
        )
        producers["carol"].append((t, DT, 500_000, 10, 1, 0))
        writers["carol"].append((t, DT, 100_000, 10, 1, 0))
    path = tmp_path / "usage.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in written))
    usage = stats.read_usage(spark, str(path))
    assert usage.where(named_stats.held(["Metadata"])).count() == 2 * len(held)
    grid = stats.on_grid(usage)
    counted = {
        (r["user"], r["time"]): r["held_requests"] for r in grid.select("user", "time", "held_requests").collect()
    }
    assert counted[("alice", T0 + 3 * DT)] == 4 and counted[("carol", T0 + DT)] == 1  # held_by, else throttles
    rows = {
        (r["client_id"] or r["topic"]) + (f"/{r['partition']}" if r["partition"] else ""): r.asDict()
        for r in named_stats.named_demand(grid, ["Metadata"]).collect()
    }
    assert set(rows) == {"etl", "orders", "orders/3"} and rows["etl"]["held_intervals"] == 5
    assert rows["orders"]["held_intervals"] == rows["orders/3"]["held_intervals"] == 5
    # a partition's demand as its topic's: its writers' parts of its bytes, as the Python twin adds them up; bob's
    # part of orders/3 a quarter of his topic part (120,000, 80,000, 64,000 B/s), carol's a fifth of her 50,000
    assert rows["orders/3"]["demand"] == pytest.approx(demand.summed_demand_rate(writers.values(), None))
    assert rows["orders/3"]["demand"] == pytest.approx((40_000 * 4 + 30_000 * 5 + 26_000 * 5) / 14)
    assert rows["etl"]["demand"] == pytest.approx(demand.demand_rate(client, None))
    assert rows["orders"]["demand"] == pytest.approx(demand.summed_demand_rate(producers.values(), None))
    # bob's part at his pace while free, carol's as sent: more than the 130 kB/s the topic was let through; alice
    # 1.5 requests/s (her pace while free, by hand: (2 x 4 s + 1.4 x 5 s + 1.2 x 5 s) / 14 s), 1.2 let through
    assert rows["orders"]["demand"] == pytest.approx((170_000 * 4 + 130_000 * 5 + 114_000 * 5) / 14)
    assert rows["etl"]["demand"] == pytest.approx(1.5)
