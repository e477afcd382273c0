"""named_stats on the lines a proxy writes (proxy.ops.usage_log.records): a topic's and a group's counts by label
and a client's requests of the APIs request_rate counts, each the busiest proxy's per interval (these quotas are
each proxy's), totals summed over every proxy."""

import json

import pytest

pytest.importorskip("pyspark", reason="the analytics extra (pip install kafka-quota-proxy[analytics]) is not installed")

from analytics import named_stats, stats  # noqa: E402
from analytics.usage_record import FIELDS  # noqa: E402
from proxy.codec.apis import JOIN_GROUP, METADATA, PRODUCE  # noqa: E402
from proxy.ops.usage_log import records  # noqa: E402
from proxy.ops.usage_table import UsageCounters  # noqa: E402

DT = 10.0
T0 = 1_795_455_600.0


def counters(requests=0, topic_bytes=None, group_requests=None) -> UsageCounters:
    row = UsageCounters()
    row.requests, row.topic_bytes, row.group_requests = requests, topic_bytes, group_requests
    return row


def lines(k: int, proxy: str, share: float) -> list[dict]:
    """What ``proxy`` logs in interval k: ``share`` of the topic's k x 1000 B/s and of the group's and the client's
    k requests/s."""
    rows = {
        ("L", "10.0.0.1", "alice", "etl", PRODUCE, None): counters(1, {"orders": int(k * 1000 * DT * share)}),
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
        (r["topic"] or r["group"] or r["client_id"], r["key"]): r.asDict()
        for r in named_stats.named_stats(named_stats.named_intervals(grid, ("JoinGroup", "Metadata"))).collect()
    }
    assert set(rows) == {("orders", "producer_byte_rate"), ("payments", "request_rate"), ("etl", "request_rate")}
    # proxy a's 3/4 of k x 1000 B/s, k = 1..20: p99 at rank 18.81 of 19, max 15,000; every byte in the total
    topic = rows[("orders", "producer_byte_rate")]
    assert (topic["rate_max"], topic["total"]) == (15_000.0, sum(k * 10_000 for k in range(1, 21)))
    assert topic["rate_p99"] == pytest.approx(0.75 * (19.81 * 1000))
    assert rows[("payments", "request_rate")]["rate_max"] == rows[("etl", "request_rate")]["rate_max"] == 15.0
    assert rows[("etl", "request_rate")]["user"] == "alice" and rows[("etl", "request_rate")]["topic"] is None
