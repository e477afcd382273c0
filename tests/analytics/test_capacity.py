"""What the recommended table commits at once against the brokers' capacity, on hand-computed figures."""

import math

import pytest

from analytics.capacity import Commitment, assess, parse_capacity, round_down, scaled, scaled_note


def test_the_capacity_flag_is_strict():
    assert parse_capacity("bytes_in=4e3, connections=20") == {"bytes_in": 4000.0, "connections": 20.0}
    for bad, said in [
        ("bytes=1", "NAME one of bytes_in, bytes_out, partitions, connections"),
        ("bytes_in=0", "a positive number"),
        ("bytes_in=lots", "a positive number"),
        ("bytes_in=1,bytes_in=2", "bytes_in given twice"),
        ("bytes_in", "a capacity is NAME=NUMBER"),
    ]:
        with pytest.raises(ValueError, match=said):
            parse_capacity(bad)


def test_the_busiest_interval_of_active_tenants_is_what_the_table_commits():
    """Three intervals: 3,000 B/s committed by 2 tenants, then 5,000 by 3, then 5,000 by 2 again: the first busiest
    (at 20) is the figure, 5,000 of 4,000: 125 %, oversubscribed, scaled by 0.8; the naive sum over every tenant seen
    (9,000) is said beside it. bytes_out has no capacity given: said without one; partitions neither: left out."""
    intervals = {"bytes_in": [(10.0, 3000.0, 2, 0), (20.0, 5000.0, 3, 0), (30.0, 5000.0, 2, 0)]}
    intervals["bytes_out"] = [(10.0, 700.0, 1, 0)]
    found = assess(intervals, {"bytes_in": 9000.0, "bytes_out": 700.0}, {"bytes_in": 4000.0})
    assert [c.name for c in found] == ["bytes_in", "bytes_out"]
    bytes_in, bytes_out = found
    assert (bytes_in.committed, bytes_in.at, bytes_in.active, bytes_in.share) == (5000.0, 20.0, 3, 1.25)
    assert bytes_in.oversubscribed and bytes_in.factor == 0.8
    assert bytes_in.line() == (
        "capacity bytes_in: the table commits 5,000 B/s at once (3 tenants active in the busiest interval; 9,000 "
        "summed over every tenant) of 4,000: 125%: OVERSUBSCRIBED"
    )
    assert not bytes_out.oversubscribed and bytes_out.factor is None
    assert bytes_out.line() == (
        "capacity bytes_out: the table commits 700 B/s at once (1 tenant active in the busiest interval; 700 summed "
        "over every tenant)"
    )
    [partitions] = assess({"partitions": [(10.0, 0.5, 1, 0)]}, {"partitions": math.inf}, {})
    assert partitions.line() == (
        "capacity partitions: the table commits 0.5 partition mutations/s at once (1 tenant active in the busiest "
        "interval; tenants with no controller_mutation_rate seen at other times)"
    )


def test_a_tenant_active_with_no_quota_makes_it_unbounded():
    [c] = assess({"connections": [(10.0, 5.0, 3, 0), (20.0, 1.0, 2, 1)]}, {}, {"connections": 100.0})
    assert math.isinf(c.committed) and c.at == 20.0 and c.oversubscribed and c.factor is None  # nothing to scale
    assert c.line() == (
        "capacity connections: unbounded: 1 of the 2 tenants active at once have no connection_creation_rate "
        "(add a <default>) of 100: OVERSUBSCRIBED"
    )


def test_a_capacity_with_no_activity_is_said_so():
    [c] = assess({}, {}, {"partitions": 10.0})
    assert c.line() == "capacity partitions: no tenant active with controller_mutation_rate in the log"
    assert not c.oversubscribed


def test_scaling_an_oversubscribed_key_rounds_each_limit_down():
    """Factor 0.8: 2,000 -> 1,600; 1,234 -> 987.2 -> 980 (two significant digits, down); 0.004 x 0.8 = 0.0032;
    the other keys are untouched. The busiest interval's 5,000 (2,000 + 1,234 + ...) then fits under 4,000."""
    over = Commitment("bytes_in", 4000.0, 5000.0, 20.0, 3, 0, 9000.0)
    other = Commitment("partitions", 1.0, 0.005, 20.0, 1, 0, 0.005)
    items = [
        {"entity": {"user": "<default>"}, "producer_byte_rate": 2000, "consumer_byte_rate": 999},
        {"entity": {"user": "a"}, "producer_byte_rate": 1234, "controller_mutation_rate": 0.004},
    ]
    assert scaled(items, [over, other]) == [
        {"entity": {"user": "<default>"}, "producer_byte_rate": 1600, "consumer_byte_rate": 999},
        {"entity": {"user": "a"}, "producer_byte_rate": 980, "controller_mutation_rate": 0.004},
    ]
    assert round_down(0.0032) == 0.0032 and round_down(1_234_567) == 1_200_000
    assert scaled_note([over, other]) == [
        "producer_byte_rate scaled by 0.800 (--capacity bytes_in=4,000, committed 5,000 at once): each limit x the "
        "factor, rounded down"
    ]


def test_each_tenants_limit_is_the_one_the_proxy_resolves():
    """a/x has its own 500 B/s, b/y the <default>/<default> 100; a/x fetches with no consumer_byte_rate (unbounded);
    10.0.0.1 its own 9 connections/s, 10.0.0.2 the ip default's 2. Summed once each: 600, unbounded, 11."""
    pytest.importorskip("pyspark", reason="the analytics extra is not installed")
    from analytics.concurrency import every_entry, limits

    items = [
        {"entity": {"user": "<default>", "client-id": "<default>"}, "producer_byte_rate": 100},
        {"entity": {"user": "a", "client-id": "x"}, "producer_byte_rate": 500},
        {"entity": {"ip": "<default>"}, "connection_creation_rate": 2},
        {"entity": {"ip": "10.0.0.1"}, "connection_creation_rate": 9},
    ]
    tenants = [("a", "x", "Produce"), ("b", "y", "Produce"), ("a", "x", "Fetch"), ("a", "x", "Metadata")]
    per_tenant, per_ip = limits(items, tenants, ["10.0.0.1", "10.0.0.2"])
    assert sorted(per_tenant, key=str) == [
        ("a", "x", "Fetch", None, None),
        ("a", "x", "Produce", 500.0, None),
        ("b", "y", "Produce", 100.0, None),
    ]
    assert per_ip == [("10.0.0.1", 9.0), ("10.0.0.2", 2.0)] and all(type(v) is float for _, v in per_ip)
    assert every_entry(per_tenant, per_ip) == {"bytes_in": 600.0, "bytes_out": math.inf, "connections": 11.0}


def test_a_quota_groups_members_share_its_one_limit_counted_once():
    """c/1 and d/2 are the group's (users c and d): both resolve to its 1,000 B/s, which the naive sum counts once,
    beside a/x's own 500; e/3 of the group's user c under its own entry {user: c, client-id: 3} is out of the group,
    as the proxy resolves it (Kafka's level 1 before the group's 3a)."""
    pytest.importorskip("pyspark", reason="the analytics extra is not installed")
    from analytics.concurrency import every_entry, limits

    items = [
        {"entity": {"user": "a", "client-id": "x"}, "producer_byte_rate": 500},
        {"entity": {"user": "c", "client-id": "3"}, "producer_byte_rate": 200},
        {"entity": {"quota-group": "team"}, "users": ["c", "d"], "producer_byte_rate": 1000},
    ]
    tenants = [("a", "x", "Produce"), ("c", "1", "Produce"), ("d", "2", "Produce"), ("c", "3", "Produce")]
    per_tenant, _ = limits(items, tenants, [])
    assert per_tenant == [
        ("a", "x", "Produce", 500.0, None),
        ("c", "1", "Produce", 1000.0, "team"),
        ("d", "2", "Produce", 1000.0, "team"),
        ("c", "3", "Produce", 200.0, None),
    ]
    assert every_entry(per_tenant, []) == {"bytes_in": 1700.0}
