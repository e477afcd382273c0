"""The usage log's parts without a network: the table, its records, the rotating writer, drops, the config."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from prometheus_client import CollectorRegistry

from config.errors import ConfigError
from config.usage import UsageLogConfig, parse_usage_log
from proxy.ops.metrics import ProxyMetrics
from proxy.ops.usage_files import RotatingWriter
from proxy.ops.usage_log import UsageLog, records
from proxy.ops.usage_table import FIELDS, LABELLED_FIELDS, THROTTLE_FIELDS, UsageTable
from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from quota.primitives.quota_groups import QuotaGroups, quota_group
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

PRODUCE, FETCH, METADATA = 0, 1, 3


def test_one_record_per_entity_per_interval_with_every_field():
    table = UsageTable()
    for _ in range(3):
        row = table.row("L", "10.0.0.1", "alice", "etl", PRODUCE)
        row.requests += 1
        row.request_bytes += 100
    table.row("L", "10.0.0.1", "alice", "etl", FETCH).response_bytes += 5000
    table.row("L", "10.0.0.2", None, None, None).connections_opened += 2
    rows = table.take()
    assert len(table) == 0  # the next interval starts empty
    out = sorted(records(rows, 1000.0, 10.0), key=lambda r: (r["ip"], str(r["api"])))
    assert [(r["ip"], r["api"]) for r in out] == [("10.0.0.1", "Fetch"), ("10.0.0.1", "Produce"), ("10.0.0.2", None)]
    produce = out[1]
    assert produce["requests"] == 3 and produce["request_bytes"] == 300 and produce["response_bytes"] == 0
    assert produce["time"] == 1000.0 and produce["interval_s"] == 10.0
    assert produce["user"] == "alice" and produce["client_id"] == "etl" and produce["listener"] == "L"
    assert out[2]["connections_opened"] == 2 and out[2]["user"] is None
    assert produce["quota_group"] is None
    grouped = records(
        rows, 1000.0, 10.0, groups=QuotaGroups([quota_group("etl", {"request_rate": 1}, users=["alice"])])
    )
    assert {r["quota_group"] for r in grouped} == {"etl", None}  # alice's rows; the connections' row names no one
    assert all(
        set(r)
        == {
            "time",
            "interval_s",
            "listener",
            "ip",
            "user",
            "client_id",
            "api",
            *FIELDS,
            *THROTTLE_FIELDS,
            *LABELLED_FIELDS,
            "proxy",
            "broker",
            "scope",
            "quota_group",
        }
        for r in out
    )
    assert (produce["held_ms"], produce["throttles"], produce["quota_rate"]) == (0, 0, None)
    assert all((r["proxy"], r["broker"], r["scope"]) == (None, None, "broker") for r in out)


def test_held_time_is_the_union_of_the_spans_and_a_byte_rate_throttle_says_q_and_o():
    """Two connections of one entity throttled for overlapping spans: throttle_ms sums them (1,500 ms), held_ms is
    their union (1,200 ms): the share of time the entity was held can never pass 1. A byte-rate throttle carries
    the quota in force and the rate measured when it was decided, which the planner's demand estimate needs."""
    table = UsageTable()
    row = table.row("L", "10.0.0.1", "alice", "etl", PRODUCE)
    ms = 1_000_000
    row.held(Throttle(1000, 1000, bound=1e6, observed_rate=2e6), 1000, 10_000 * ms)
    row.held(Throttle(500, 500, bound=1e6, observed_rate=1.5e6), 500, 10_700 * ms)  # overlaps 300 ms
    row.held(Throttle(300, 300), 0, 12_000 * ms)  # a throttle whose mute was capped to nothing: no time held
    (out,) = records(table.take(20_000 * ms), 1000.0, 10.0)
    assert out["throttle_ms"] == 1500 and out["held_ms"] == 1200
    assert out["throttles"] == 2 and out["quota_rate"] == 1e6 and out["observed_rate_sum"] == 3.5e6
    assert out["held_by"] == {"other": 2}  # held twice (the capped one held nothing), by throttles naming no quota


def test_held_by_tells_the_quota_that_held_each_request_apart_a_topic_or_group_left_out():
    """What the planner needs to estimate the demand a request rate or a topic quota hid: which quota held each
    request (the longest hold's, as the request path combines them); the names stay a handful whatever the topics."""
    table = UsageTable()
    row = table.row("L", "10.0.0.1", "alice", "etl", PRODUCE)
    ms = 1_000_000
    row.held(Throttle(100, 100, by="topic_producer_byte_rate (topic orders)"), 100, 1_000 * ms)
    row.held(Throttle(100, 100, by="topic_producer_byte_rate (topic payments)"), 100, 2_000 * ms)
    row.held(Throttle(100, 100, bound=1e6, observed_rate=2e6, by="producer_byte_rate"), 100, 3_000 * ms)
    table.row("L", "10.0.0.1", "alice", "etl", METADATA).held(Throttle(50, 50, by="request_rate"), 50, 4_000 * ms)
    produce, metadata = records(table.take(20_000 * ms), 1000.0, 10.0)
    assert produce["held_by"] == {"topic_producer_byte_rate": 2, "producer_byte_rate": 1}
    assert produce["throttles"] == 1  # the byte rate's alone
    assert metadata["held_by"] == {"request_rate": 1} and metadata["throttles"] == 0


def test_held_time_past_the_interval_end_goes_to_the_next_interval():
    """A tenant muted for 8 s from 6 s before the interval ends: 6 s held in this interval, 2 s in the next, which
    has a record even though the tenant sent nothing in it (what the planner's demand estimate needs: an interval
    held with nothing sent is not an interval the tenant was idle)."""
    table = UsageTable()
    ms = 1_000_000
    table.row("L", "10.0.0.1", "alice", "etl", PRODUCE).held(
        Throttle(8000, 8000, bound=1e6, observed_rate=2e6), 8000, 4_000 * ms
    )
    (first,) = records(table.take(10_000 * ms), 1000.0, 10.0)
    (second,) = records(table.take(20_000 * ms), 1010.0, 10.0)
    assert first["held_ms"] == 6000 and first["throttle_ms"] == 8000
    assert second["held_ms"] == 2000 and second["throttle_ms"] == 0 and second["request_bytes"] == 0
    assert len(table.take(30_000 * ms)) == 0


def test_a_byte_rate_manager_throttle_carries_the_quota_and_the_observed_rate():
    """Kafka's formula X = (O - Q) / Q x W: the decision carries O and Q themselves (X is capped at the window)."""
    clock = ManualClock(0)
    quotas = QuotaTable.from_values([({"client-id": "etl"}, {"producer_byte_rate": 1000})])
    manager = ClientQuotaManager(quotas, "producer_byte_rate", clock, QuotaWindow(11, 1))
    decision = manager.record_and_decide("alice", "etl", 30_000, now_ms=0)  # 30,000 B over 10 s: 3,000 B/s
    assert isinstance(decision, Throttle)
    assert decision.bound == 1000 and decision.observed_rate == pytest.approx(3000)
    # (3000 - 1000) / 1000 x 10 s = 20 s, capped at the window (11 s): O could no longer be read back from X
    assert decision.throttle_time_ms == 11_000


def test_an_interval_keeps_max_rows_entities_and_the_rest_together_in_overflow_rows():
    """Issue 35: one row per (listener, IP, user, client id, API) per interval, so a flood of rotating client ids
    grew the interval's table (and its lines) without end. Past ``max_rows`` the new entities share their
    listener's and API's ``<overflow>`` row; nothing they did is lost, and the entities already there keep theirs."""
    table = UsageTable(max_rows=100)
    for i in range(1000):
        table.row("L", "10.0.0.1", "alice", f"rotating-{i}", PRODUCE).requests += 1
    table.row("L", "10.0.0.1", "alice", "rotating-7", PRODUCE).requests += 1  # has its own row: kept
    broker = table.for_broker(3)
    for i in range(50):
        broker.row("L", f"10.1.0.{i}", "bob", "c", FETCH).requests += 1
    assert len(table) == 100 + 2  # the first 100, one <overflow> row for Produce and one for broker 3's Fetch
    out = list(records(table.take(), 1000.0, 10.0))
    assert sum(r["requests"] for r in out) == 1051
    overflow = [r for r in out if r["client_id"] == "<overflow>"]
    assert sorted((r["api"], r["broker"], r["requests"], r["ip"], r["user"]) for r in overflow) == [
        ("Fetch", 3, 50, "<overflow>", "<overflow>"),
        ("Produce", None, 900, "<overflow>", "<overflow>"),
    ]
    assert next(r for r in out if r["client_id"] == "rotating-7")["requests"] == 2


def test_records_say_which_proxy_broker_and_scope_they_come_from():
    """A cluster-mode broker port's rows carry its node id, the bootstrap port's (and a sidecar's) none; every record
    names the proxy and the quota.scope in force (what the planner recommends by)."""
    table = UsageTable()
    broker_3 = table.for_broker(3)
    broker_3.row("L", "10.0.0.1", "alice", "etl", PRODUCE).request_bytes += 100
    broker_3.recorder(type("S", (), {"listener": "L", "peer_ip": "10.0.0.1", "user": "alice"})()).response(
        type("H", (), {"client_id": "etl", "api_key": FETCH})(), 70
    )
    table.row("L", "10.0.0.1", "alice", "etl", PRODUCE).request_bytes += 5
    assert len(broker_3) == len(table) == 3
    out = sorted(
        records(broker_3.take(), 1000.0, 10.0, proxy="host-a:9092", scope="cluster"),
        key=lambda r: (str(r["broker"]), r["api"]),
    )
    assert len(table) == 0  # one table: the view took the table's interval
    assert [(r["api"], r["broker"], r["request_bytes"], r["response_bytes"]) for r in out] == [
        ("Fetch", 3, 0, 70),
        ("Produce", 3, 100, 0),
        ("Produce", None, 5, 0),
    ]
    assert {(r["proxy"], r["scope"]) for r in out} == {("host-a:9092", "cluster")}


class Wall:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def files(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".jsonl"))


def test_the_writer_rotates_by_size_and_age_and_keeps_max_files(tmp_path):
    wall = Wall()
    writer = RotatingWriter(
        UsageLogConfig(str(tmp_path), max_file_bytes=4096, max_file_age_seconds=60, max_files=3), wall
    )
    line = "x" * 1023 + "\n"
    writer.write([line] * 3)
    writer.write([line] * 2)  # 5 KiB now: past max_file_bytes, the next write opens a new file
    assert len(files(tmp_path)) == 1
    wall.t += 1
    writer.write([line])
    assert len(files(tmp_path)) == 2
    wall.t += 61  # past max_file_age_seconds
    writer.write([line])
    assert len(files(tmp_path)) == 3
    for _ in range(3):
        wall.t += 61
        writer.write([line])
    writer.close()
    kept = files(tmp_path)
    assert len(kept) == 3  # the oldest were deleted
    assert sum(os.path.getsize(tmp_path / n) for n in kept) == 3 * 1024


def test_records_reach_the_files_and_a_full_or_missing_disk_drops_and_counts(tmp_path):
    async def scenario():
        metrics = ProxyMetrics(CollectorRegistry())
        blocked = tmp_path / "not-a-dir"
        blocked.write_text("a file where the directory should be")  # every write fails, as on a full disk
        good = UsageLog(UsageLogConfig(str(tmp_path / "usage"), interval_seconds=60), metrics)
        bad = UsageLog(UsageLogConfig(str(blocked / "usage"), interval_seconds=60), metrics)
        for log in (good, bad):
            log.start()
            log.table.row("L", "1.2.3.4", "u", "c", PRODUCE).requests += 7
            await log.stop()  # the current interval is written at shutdown
        return metrics

    metrics = asyncio.run(scenario())
    registry = metrics.registry
    assert registry.get_sample_value("kafka_quota_proxy_usage_log_records_total") == 1
    assert registry.get_sample_value("kafka_quota_proxy_usage_log_dropped_records_total") == 1
    [name] = files(tmp_path / "usage")
    [record] = [json.loads(line) for line in (tmp_path / "usage" / name).read_text().splitlines()]
    assert record["requests"] == 7 and record["api"] == "Produce"


def test_config_section_defaults_and_errors():
    assert parse_usage_log(None, "usage_log") is None
    config = parse_usage_log({"dir": "/tmp/u"}, "usage_log")
    assert (config.interval_seconds, config.max_file_bytes, config.max_files) == (10.0, 64 * 2**20, 100)
    for raw, message in [
        ({}, "usage_log.dir: required key is missing"),
        ({"dir": ""}, "usage_log.dir: expected a directory path"),
        ({"dir": "/u", "interval_seconds": 0}, "usage_log.interval_seconds: expected a number"),
        ({"dir": "/u", "max_files": 1.5}, "usage_log.max_files: expected an integer"),
        ({"dir": "/u", "colour": 1}, "usage_log.colour: unknown key"),
    ]:
        with pytest.raises(ConfigError) as info:
            parse_usage_log(raw, "usage_log")
        assert message in str(info.value)


def test_topic_bytes_are_summed_by_topic_label_in_the_requests_row():
    from proxy.apis.usage import Usage
    from proxy.codec.header import RequestHeader

    table = UsageTable()
    recorder = table.recorder(type("S", (), {"listener": "L", "peer_ip": "10.0.0.1", "user": "alice"})())
    header = RequestHeader(100, PRODUCE, 9, 1, "etl", 20, 1)
    for _ in range(2):
        recorder.planned(header, Usage(topic_bytes=(("orders", 10), ("<default>", 5))))
    recorder.planned(RequestHeader(100, FETCH, 12, 2, "etl", 20), Usage())
    recorder.planned(RequestHeader(100, 11, 5, 3, "etl", 20), Usage(group_requests=(("<default>", 1),)))
    out = {r["api"]: r for r in records(table.take(), 1000.0, 10.0)}
    assert out["Produce"]["topic_bytes"] == {"orders": 20, "<default>": 10}
    assert out["Fetch"]["topic_bytes"] is None and out["Fetch"]["group_requests"] is None
    assert out["JoinGroup"]["group_requests"] == {"<default>": 1}
    json.dumps(out["Produce"])  # as the writer writes it
