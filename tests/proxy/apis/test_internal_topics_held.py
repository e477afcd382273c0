"""A Produce held for its new producer id, on a proxy with internal topics, from a tenant (issue 36).

A Produce naming two topics cannot stream past the internal-topic guard: the guard wraps the producer-id stage's
plan and its ``HoldFor``. Both must keep what that stage put there: the plan's ``abandon`` (the token goes back when
the client leaves mid-hold) and the hold's delay (the connection keeps it on its own deadline, and the client is read
once more meanwhile, so its close is seen at all). Before, the guard rebuilt both by hand and dropped fields.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from config.loader import parse_config
from proxy.apis import ConnectionScope, HoldFor, Session, plan_request
from proxy.cluster.own_clients import OwnConnections
from proxy.cluster.topics import Topics
from proxy.codec.apis import PRODUCE
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.connection.core import ConnectionCore
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from tests.fakes import NULL_API_METRICS

CONFIG_TOPIC = "__kafka_quota_proxy_configs"


class NobodyIsOwn(OwnConnections):
    def is_own(self, peer, local) -> bool:
        return False


@pytest.fixture
def guarded_scope():
    clock = ManualClock(1_000_000)
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "volume_usage": {"missing_data_action": "OPEN"},
            "dynamic_config": {},
            "admin_principals": ["User:admin"],
            "quotas": [{"entity": {"user": "<default>"}, "producer_ids_rate": 2}],
            "settings": {
                "producer.id.quota.window.num": 1,
                "producer.id.quota.window.size.seconds": 10,
                "producer.id.quota.max.hold.ms": 6_000,
                "quota.mute.max.ms": 25_000,
            },
        }
    )  # a token every 5 s
    quotas = ProxyQuotas(config, clock)
    assert CONFIG_TOPIC in quotas.internal_topics
    guard = InternalTopicGuard(quotas.internal_topics, config.admin_principals, own=NobodyIsOwn())
    return ConnectionScope(None, Topics(), quotas.home, guard=guard), clock


def produce(pid: int, topics=("orders", "audit"), corr: int = 1) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=0, key=None, value=b"v", headers=[])
    records = bytes(builder.build())
    msg = new_request(
        PRODUCE,
        9,
        acks=-1,
        timeout_ms=30000,
        topic_data=[{"name": t, "partition_data": [{"index": 0, "records": records}]} for t in topics],
    )
    return bytearray(frame(encode_request_header(PRODUCE, 9, corr, "p") + encode_request(PRODUCE, 9, msg)))


class Connection:
    """A connection core on the fake clock: a held Produce is the flow's, ended by its deadline."""

    def __init__(self, scope, clock):
        self.to_broker, self.clock = bytearray(), clock
        self.core = ConnectionCore(
            scope,
            Session("L", "10.0.0.1"),
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=10,
            write_client=lambda data: None,
            write_broker=self.to_broker.extend,
            clock=lambda: clock.now_ms() * 1_000_000,
            api_metrics=lambda key: NULL_API_METRICS,
        )

    def send(self, buf):
        self.core.client_bytes(memoryview(buf))
        return self.core.step(self.clock.now_ms() * 1_000_000)


def test_the_guard_keeps_the_held_plans_abandon_and_the_holds_delay(guarded_scope):
    scope, clock = guarded_scope
    for pid in (1, 2):  # the burst
        plan_request(
            scope,
            Session("L", "10.0.0.1"),
            parse_request_prefix(produce(pid), 1 << 30, scope.quotas.reads_produce_prefix),
        )
    buf = produce(3, topics=("orders", CONFIG_TOPIC))  # a tenant's Produce naming an internal topic too: guarded
    header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
    plan = plan_request(scope, Session("L", "10.0.0.1"), header)
    assert plan.action is BUFFER and plan.abandon is not None
    outcome = plan.decide(memoryview(buf)[header.header_length :])
    assert isinstance(outcome, HoldFor) and outcome.delay_ms == 5_000


def test_a_guarded_held_produce_whose_client_goes_gives_its_token_back_and_is_never_forwarded(guarded_scope):
    scope, clock = guarded_scope
    quota = scope.quotas.producer_ids
    conn = Connection(scope, clock)
    for pid in (1, 2):
        conn.send(produce(pid, corr=pid))
    forwarded = len(conn.to_broker)
    state = conn.send(produce(3, corr=3))  # two topics: the guard looks at the body, the hold waits 5 s
    assert conn.core.flow.held == 1
    assert state.reading_client  # watched while held, so the close below is seen
    assert quota.stats(clock.now_ms())[0].tokens == -1
    conn.core.requests.client_gone()
    (stats,) = quota.stats(clock.now_ms())
    assert stats.abandoned_count == 1 and stats.tokens == 0  # the hold released: id 3 unknown, its token back
    clock.advance(5_000)
    conn.core.step(clock.now_ms() * 1_000_000)
    assert len(conn.to_broker) == forwarded
