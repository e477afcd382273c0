"""``kafka-quota-proxy explain``'s text, from an answer computed on a fake clock: every part an on-call SRE reads
(the verdict and why, the entry and its level, the volume state and snapshot ages, the connections, the full tables,
the workers that did not answer)."""

from __future__ import annotations

import json
from types import MappingProxyType

from proxy.cli.explain import build_parser, render_text
from proxy.ops.explain import whole_answer
from quota import DEFAULT, ManualClock, QuotaTable, QuotaWindow
from quota.explain.explain import explain
from quota.explain.state import ByteRateSet, QuotaState, VolumeView
from quota.explain.values import OpenConnection, Who, as_json
from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import ConnectionLimits, ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.managers.volume import THROTTLE, VolumeState
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE

WINDOW = QuotaWindow(11, 1)


def test_the_text_says_why_with_every_part_an_sre_reads():
    clock = ManualClock(5_000_000)
    table = QuotaTable.from_values(
        [({"user": "alice"}, {PRODUCER_BYTE_RATE: 1000}), ({"client-id": DEFAULT}, {PRODUCER_BYTE_RATE: 50_000})]
    )
    produce = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW, max_tracked_entities=1)
    produce.record_and_get_throttle_time_ms("alice", "etl", 30_000)
    scaled = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW)
    volume = VolumeView(
        VolumeState(THROTTLE, 0.5, (3,), (), 2, 0.9, 1, 0, {1: 4_990_000}, None), scaled, 60_000, "PAUSE"
    )
    state = QuotaState(
        table,
        (
            ByteRateSet(
                "", produce, ClientQuotaManager(table, CONSUMER_BYTE_RATE, clock, WINDOW), ProducerIdQuotaManager(table)
            ),
        ),
        ControllerMutationQuotaManager(table, clock, WINDOW),
        ConnectionQuotas(["PLAINTEXT"], WINDOW, ConnectionLimits(ip_rates=MappingProxyType({DEFAULT: 10.0}))),
        ("PLAINTEXT",),
        clock.now_ms(),
        wall_ms=5_000_000,
        volume=volume,
        connections_open=1,
        open_connections=(OpenConnection("PLAINTEXT", "10.0.0.1:4000", "alice", "MUTED_AND_THROTTLED", 900, 0, "etl"),),
    )
    who = Who("alice", "etl", "10.0.0.1")
    answer = {"worker": "0", **{k: v for k, v in as_json(explain(state, who)).items() if k != "who"}}
    text = render_text(json.loads(whole_answer(as_json(who), [answer], ["1"], "a note")))
    assert text.startswith('user "alice", client-id "etl", from 10.0.0.1: THROTTLED\n')
    for said in (
        "  a note",
        "workers that did not answer: 1",
        "worker 0: THROTTLED",
        "  because producer_byte_rate (user/client-id): 3000.0 bytes/s measured against 1000",
        "entry /users/alice: level 3 of 8 (/users/<user>)",
        "overrides /clients/<default> = 50000",
        'counted in user="alice" client-id=""',
        "volume usage THROTTLE: producer_byte_rate scaled by 0.500",
        "volume usage: THROTTLE (factor 0.500); snapshot ages: broker 1 10 s; fresh for 60 s; no fresh data "
        "from brokers [3] (PAUSE applies)",
        '10.0.0.1:4000 on PLAINTEXT: MUTED_AND_THROTTLED, muted 900 ms more for client-id "etl"',
        "full tables (quota.max.tracked.entities): producer_byte_rate",
        "connection_creation_rate (ip): WITHIN, limit 10 connections/s, measured 0",
        "enforced by the brokers, not the proxy: request_percentage",
    ):
        assert said in text, said


def test_the_command_line_needs_a_client_id_and_an_ip():
    args = build_parser().parse_args(["--client-id", "", "--ip", "10.0.0.1"])
    assert (args.ops, args.user, args.client_id, args.listener, args.json) == (
        "http://127.0.0.1:9464",
        "ANONYMOUS",
        "",
        None,
        False,
    )


def test_a_topic_asked_about_and_the_quota_that_muted_a_connection_are_said():
    from quota.managers.topic_quota import TopicQuotas
    from quota.primitives.topic_quotas import topic_table

    clock = ManualClock(5_000_000)
    table = QuotaTable.from_values([])
    topics = TopicQuotas(topic_table({DEFAULT: {PRODUCER_BYTE_RATE: 1000}}), clock, WINDOW, 25_000, 100)
    topics.produce.record_topic("orders", 30_000)
    by = "topic_producer_byte_rate (topic orders)"
    state = QuotaState(
        table,
        (
            ByteRateSet(
                "",
                ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW),
                ClientQuotaManager(table, CONSUMER_BYTE_RATE, clock, WINDOW),
                ProducerIdQuotaManager(table),
            ),
        ),
        ControllerMutationQuotaManager(table, clock, WINDOW),
        ConnectionQuotas(["PLAINTEXT"], WINDOW, ConnectionLimits()),
        ("PLAINTEXT",),
        clock.now_ms(),
        connections_open=1,
        open_connections=(
            OpenConnection("PLAINTEXT", "10.0.0.1:4000", "ANONYMOUS", "MUTED_AND_THROTTLED", 900, 0, "etl", by),
        ),
        topics=topics,
    )
    who = Who("ANONYMOUS", "etl", "10.0.0.1", topic="orders")
    answer = {"worker": None, **{k: v for k, v in as_json(explain(state, who)).items() if k != "who"}}
    text = render_text(json.loads(whole_answer(as_json(who), [answer], [])))
    for said in (
        f"because connection 10.0.0.1:4000 on PLAINTEXT: muted 900 ms more by {by} (MUTED_AND_THROTTLED)",
        "because producer_byte_rate (topic orders): 3000.0 bytes/s measured against 1000",
        "set by /topics/<default>",
        f'muted 900 ms more for client-id "etl" by {by}',
    ):
        assert said in text, said
    args = build_parser().parse_args(["--client-id", "etl", "--ip", "10.0.0.1", "--topic", "orders"])
    assert args.topic == "orders"
