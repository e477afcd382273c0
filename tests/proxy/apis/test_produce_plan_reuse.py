"""A Produce planned with its read-only stages reused per connection (proxy.apis.reuse) behaves as when every stage
is asked for each request.

Two connection cores, each with its own proxy (the same configuration, a fake clock each), take the same Produce
requests, answers and configuration changes: one plans with :func:`proxy.apis.plan_request` (node endpoints, the
internal-topic guard, the exemption of the proxy's own writes, PAUSE, topic and volume rates reused; producer ids and
``producer_byte_rate`` asked each time), the other folds every stage of the chain for each request
(:func:`proxy.apis.stages.fold`, as without the reuse). After each step everything observable must be the same on
both: the bytes each side received, whether the client is read and the next deadline, the API metrics, the usage log,
the guard's refusals, and every quota's state (producer byte rates, producer ids, topic and volume rates, shadow
counts). The requests go through what the reused plans depend on: versions (node endpoints from v10, topics by id from
v13), topics (the proxy's internal ones, two at once, by id), acks=0, new producer ids; and the changes: quota tables
swapped, a ``producer_ids_rate`` removed and added again, shadow mode and back, a topic quota added and removed, a
volume past its soft limit, at PAUSE and open again, a request_rate counting Produce and no longer, an admin principal
and a tenant's on the same connection. An inputs that leaves out any one of what
:func:`proxy.apis.reuse.produce_inputs` reads makes the two differ (:func:`test_each_input_is_needed`).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from config.loader import parse_config
from config.request_rate import api_keys
from proxy import apis
from proxy.apis import CHAINS, UNCOUNTED_CHAINS, ConnectionScope, Session, plan_request
from proxy.apis.reuse import produce_inputs
from proxy.apis.stages import fold
from proxy.cluster.broker_ports import BrokerPorts
from proxy.cluster.own_clients import OwnConnections
from proxy.cluster.topics import Topics
from proxy.codec.apis import API_VERSIONS, METADATA, PRODUCE
from proxy.codec.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    frame,
    parse_request_header,
)
from proxy.codec.messages import decode_request, encode_request, encode_response, new_request, new_response
from proxy.connection.request_frames import PLAN_REQUEST
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.managers.volume import Limit, Snapshot, Volume
from quota.primitives.clock import ManualClock
from tests.proxy.apis.recorded_connection import RecordedConnection

CONFIG_TOPIC = "__kafka_quota_proxy_configs"
VOLUME_TOPIC = "__kafka_quota_proxy_volume_usage"
IDS = {
    "orders": uuid.UUID("0b6f8f3a-0c1e-4b5e-9a51-3d8b1c6f2e11"),
    "audit": uuid.UUID("5c0a9e1f-2b7d-4c3e-8f6a-9d1e2c3b4a50"),
    CONFIG_TOPIC: uuid.UUID("9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4"),
}
GB = 1_000_000_000
SETTINGS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def config(*entries: dict, **settings: Any) -> dict:
    return {
        "upstream": {"bootstrap_servers": ["b:1"]},
        "listeners": [{"name": "L", "bind": "h:2"}],
        "admin_principals": ["User:admin"],
        "volume_usage": {"missing_data_action": "OPEN", "topic": VOLUME_TOPIC, "produce_base_rate": 4000},
        "dynamic_config": {"topic": CONFIG_TOPIC},
        "quotas": list(entries),
        "settings": {**SETTINGS, **settings},
    }


USERS = {"entity": {"user": "<default>"}, "producer_byte_rate": 3000, "producer_ids_rate": 2}
ENFORCED = config(USERS)
ONE_CLIENT = config(
    {"entity": {"client-id": "c1"}, "producer_byte_rate": 2000},
    {"entity": {"user": "<default>"}, "producer_ids_rate": 2},
)
NO_PRODUCER_IDS = config({"entity": {"user": "<default>"}, "producer_byte_rate": 3000})
NO_PRODUCE_QUOTA = config({"entity": {"user": "<default>"}, "consumer_byte_rate": 3000})
THROTTLED_IDS = config(USERS, **{"producer.id.quota.enforcement": "throttle"})
# every Produce over its byte rate, and new producer ids throttled: both asked stages make a plan, after the reused
# ones (node endpoints from v10)
ALL_THROTTLED = config(
    {"entity": {"user": "<default>"}, "producer_byte_rate": 10, "producer_ids_rate": 2},
    **{"producer.id.quota.enforcement": "throttle"},
)
TOPIC_QUOTAS = parse_config(config({"entity": {"topic": "<default>"}, "producer_byte_rate": 2500})).topic_quotas
NO_TOPIC_QUOTAS = parse_config(ENFORCED).topic_quotas
GROUP_QUOTAS = parse_config(ENFORCED).group_quotas


class NobodyIsOwn(OwnConnections):
    def is_own(self, peer, local) -> bool:
        return False


def always_asking(scope: ConnectionScope, session: Session, header: RequestHeader):
    """Every stage of the request's chain asked, as without proxy.apis.reuse (a Produce passes the checks of
    plan_request before it, whose other paths these requests never take)."""
    chain = (CHAINS if header.api_key in scope.quotas.requests.counted else UNCOUNTED_CHAINS)[header.api_key]
    return fold(chain, scope, session, header)


def records(pid: int, size: int = 300) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"v" * size, headers=[])
    return bytes(builder.build())


class Proxy(RecordedConnection):
    """One connection through a proxy of its own in cluster mode, between a client and this test as its broker."""

    def __init__(self, planner) -> None:
        self.clock = ManualClock(1_800_000_000_000)
        raw = parse_config(ENFORCED)
        self.quotas = ProxyQuotas(raw, self.clock)
        topics = Topics()
        metadata = new_response(
            METADATA,
            12,
            topics=[{"name": name, "topic_id": i, "partitions": [{"partition_index": 0}]} for name, i in IDS.items()],
        )
        topics.learn_from_metadata(metadata, self.clock.now_ms())
        ports = BrokerPorts("L", "proxy.example", 30000, lambda node_id: True)
        self.guard = InternalTopicGuard(self.quotas.internal_topics, raw.admin_principals, own=NobodyIsOwn())
        self.connect(ConnectionScope(ports, topics, self.quotas.home, guard=self.guard), planner)
        self._answered = 0  # bytes of to_broker answered

    def volume(self, used_gb: int) -> None:
        """A snapshot of the one broker's volume: 10 GB used is open, 70 past the soft limit, 95 at PAUSE."""
        snapshot = Snapshot(
            1,
            self.clock.now_ms(),
            Limit("ConsumedSpace", 50 * GB),
            Limit("ConsumedSpace", 90 * GB),
            (Volume("/d", 100 * GB, used_gb * GB),),
        )
        assert self.quotas.volume is not None
        self.quotas.volume.record(b"1", snapshot.to_json())

    def produce(self, version: int, client_id: str, topics: tuple[str, ...], pid: int, acks: int, corr: int) -> None:
        """The client sends a Produce; once the proxy forwards it (after any mute or hold), the broker answers it
        (unless acks=0), naming a moved leader every other time."""
        by_id = version >= 13
        data = [
            {
                **({"topic_id": IDS[t]} if by_id else {"name": t}),
                "partition_data": [{"index": 0, "records": records(pid)}],
            }
            for t in topics
        ]
        body = encode_request(
            PRODUCE, version, new_request(PRODUCE, version, acks=acks, timeout_ms=1000, topic_data=data)
        )
        reading, _, deadline = self.step()
        while not reading and deadline is not None:  # a mute after the last answer: the client waits it out
            self.clock.advance(max(1, -(-deadline // 1_000_000) - self.clock.now_ms()))
            reading, _, deadline = self.step()
        assert reading
        self.core.client_bytes(memoryview(frame(encode_request_header(PRODUCE, version, corr, client_id) + body)))
        deadline = self.step()[2]
        while not self.to_broker and deadline is not None:  # muted or held: read (or forwarded) once that is over
            self.clock.advance(max(1, -(-deadline // 1_000_000) - self.clock.now_ms()))
            deadline = self.step()[2]
        while self._answered < len(self.to_broker):  # each frame the broker received: answered as it expects
            size = int.from_bytes(self.to_broker[self._answered : self._answered + 4], "big")
            self.answer(bytes(self.to_broker[self._answered : self._answered + 4 + size]))
            self._answered += 4 + size

    def answer(self, request: bytes) -> None:
        header = parse_request_header(request, 1 << 20)
        version = header.api_version
        if header.api_key == API_VERSIONS:  # the proxy's probe after an acks=0 produce: does the broker answer it?
            versions = new_response(
                API_VERSIONS, 0, api_keys=[{"api_key": PRODUCE, "min_version": 3, "max_version": 13}]
            )
            body = encode_response(API_VERSIONS, 0, versions)
            self.core.broker_bytes(
                memoryview(frame(encode_response_header(API_VERSIONS, 0, header.correlation_id) + body))
            )
            self.step()
            return
        msg = decode_request(PRODUCE, version, memoryview(request)[header.header_length :])
        if msg.acks == 0:
            return
        by_id = version >= 13
        answer: dict[str, Any] = {
            "responses": [
                {
                    **({"topic_id": t.topic_id} if by_id else {"name": t.name}),
                    "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 41}],
                }
                for t in msg.topic_data
            ]
        }
        if version >= 10 and header.correlation_id % 5:  # most answers, by a period not of REQUESTS (24)
            answer["node_endpoints"] = [{"node_id": 2, "host": "broker-2.kafka", "port": 9092, "rack": None}]
        body = encode_response(PRODUCE, version, new_response(PRODUCE, version, **answer))
        self.core.broker_bytes(
            memoryview(frame(encode_response_header(PRODUCE, version, header.correlation_id) + body))
        )
        self.step()

    def seen(self) -> dict[str, Any]:
        """Everything observable since the last call (what each side received, the metrics, the usage log) and the
        quotas' state now."""
        now = self.clock.now_ms()
        quotas = self.quotas.home
        assert quotas.volume is not None
        seen = {
            "to_broker": bytes(self.to_broker),
            "to_client": bytes(self.to_client),
            "state": self.step(),
            "metrics": list(self.metrics),
            "usage": {
                key: {name: getattr(row, name) for name in type(row).__slots__}
                for key, row in self.usage.take(now * 1_000_000).items()
            },
            "produce": sorted(map(repr, quotas.produce.stats(now))),
            "producer_ids": sorted(map(repr, quotas.producer_ids.stats(now))),
            "new_pids": quotas.producer_ids.new_pids_counted,
            "topics": sorted(map(repr, quotas.topics.produce.stats(now))),
            "volume": sorted(map(repr, quotas.volume.produce.stats(now))),
            "volume_refused": dict(quotas.volume.refused_writes),
            "requests": sorted(map(repr, quotas.requests.clients.stats(now))),
            "shadows": {quota: list(counts) for quota, counts in quotas.shadows.counts.items()},
            "refused": dict(self.guard.refused_total),
            "session": (
                self.session.muted_for,
                self.session.muted_by,
                self.session.producer_id,
                self.session.producer_id_checked_ms,
                self.session.held_bytes,
            ),
        }
        assert self._answered == len(self.to_broker)
        self.to_broker.clear()
        self._answered = 0
        self.to_client.clear()
        self.metrics.clear()
        return seen


REQUESTS = [  # (version, client id, topics, producer id, acks) of a connection's Produce requests
    (10, "c2", (CONFIG_TOPIC,), 1, 1),  # the first after a change: the plans reused before it must not serve it
    (10, "c1", ("orders",), 1, 1),
    (10, "c1", ("orders",), 2, 1),  # a new producer id
    (10, "c1", ("orders",), 2, 1),
    (10, "c1", ("audit",), 2, 0),  # another topic, acks=0
    (10, "c1", (CONFIG_TOPIC,), 2, 1),  # the proxy's config topic: refused to a tenant, exempt for an admin
    (10, "c1", ("orders", "audit"), 2, 1),  # two topics
    (10, "c1", ("orders", CONFIG_TOPIC), 2, 1),
    (9, "c1", ("orders",), 2, 1),  # before node endpoints: a plan reused from the fourth on
    (9, "c1", ("orders",), 2, 1),
    (9, "c1", ("orders",), 2, 1),
    (9, "c1", ("orders",), 2, 1),
    (10, "c1", ("orders",), 2, 1),  # node endpoints in most answers (see answer), rewritten from v10
    (9, "c2", (CONFIG_TOPIC,), 3, 1),
    (13, "c1", ("orders",), 3, 1),  # by topic id
    (13, "c1", ("orders",), 3, 1),
    (13, "c1", ("orders",), 3, 1),
    (13, "c1", ("orders",), 3, 1),
    (13, "c1", (CONFIG_TOPIC,), 3, 1),
    (13, "c2", ("audit",), 4, 1),
    (10, "c2", (CONFIG_TOPIC,), 4, 1),  # the last before a change (the next principal's first is the same)
    (10, "c2", (CONFIG_TOPIC,), 4, 1),
    (10, "c2", (CONFIG_TOPIC,), 4, 1),
    (10, "c2", (CONFIG_TOPIC,), 4, 1),
]


def configured(settings: dict):
    return lambda proxy: proxy.quotas.apply(parse_config(settings))


def counting_produce(counted: bool):
    """A request_rate that starts (stops) counting Produce, nothing else changed."""
    apis = ["Produce", "Metadata"] if counted else ["Metadata"]
    return lambda proxy: proxy.quotas.requests.reconfigure(GROUP_QUOTAS, api_keys(apis))


def principal(name: str):
    return lambda proxy: proxy.session.authenticated(name)


def volume(used_gb: int):
    return lambda proxy: proxy.volume(used_gb)


CHANGES = [  # each followed by every request of REQUESTS, then 700 ms
    ("enforced", configured(ENFORCED)),
    ("an admin principal", principal("admin")),
    ("a tenant's again", principal("bob")),
    ("a quota table where c2 has none", configured(ONE_CLIENT)),
    ("enforced again", configured(ENFORCED)),
    ("producer_ids_rate removed", configured(NO_PRODUCER_IDS)),
    ("and added again", configured(ENFORCED)),
    ("no producer_byte_rate at all", configured(NO_PRODUCE_QUOTA)),
    ("enforced again", configured(ENFORCED)),
    ("producer ids throttled, not held", configured(THROTTLED_IDS)),
    ("enforced again", configured(ENFORCED)),
    ("every request over its byte rate, new producer ids throttled", configured(ALL_THROTTLED)),
    ("enforced again", configured(ENFORCED)),
    ("the proxy switched to shadow mode alone", lambda proxy: proxy.quotas.set_mode("shadow")),
    ("and back to enforce", lambda proxy: proxy.quotas.set_mode("enforce")),
    ("a topic quota added alone", lambda proxy: proxy.quotas.topics.update(TOPIC_QUOTAS)),
    ("and removed", lambda proxy: proxy.quotas.topics.update(NO_TOPIC_QUOTAS)),
    ("a volume past its soft limit", volume(70)),
    ("an admin there", principal("admin")),
    ("the volume at PAUSE", volume(95)),
    ("a tenant at PAUSE", principal("bob")),
    ("the volume open again", volume(10)),
    ("request_rate counting Produce", counting_produce(True)),
    ("and no longer", counting_produce(False)),
    ("an admin at last", principal("admin")),
]


def run(reusing: Proxy, asking: Proxy) -> int:
    """Every change, then every request, on both; the requests planned without asking the read-only stages."""
    corr = reused_for = 0
    for change, make in CHANGES:
        for proxy in (reusing, asking):
            make(proxy)
        for request in REQUESTS:
            corr += 1
            for proxy in (reusing, asking):
                proxy.produce(*request, corr=corr)
            assert reusing.seen() == asking.seen(), (change, request)
            memo = reusing.session.reused.get(PRODUCE)
            reused_for += memo is not None and memo[3]
        for proxy in (reusing, asking):
            proxy.clock.advance(700)
        assert reusing.seen() == asking.seen(), change
    return reused_for


# plan_request, and the compiled planner where it is built (proxy/connection/native/planner.c: its reused_asking's
# turns in C), which every connection plans with then
PLANNERS = [pytest.param(plan_request, id="python")]
PLANNERS += [] if PLAN_REQUEST is plan_request else [pytest.param(PLAN_REQUEST, id="compiled")]


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_produce_planned_with_its_reading_stages_reused_behaves_as_every_stage_asked(planner):
    reusing, asking = Proxy(planner), Proxy(always_asking)
    reused_for = run(reusing, asking)
    assert PRODUCE not in asking.session.reused
    assert reused_for >= 90  # a single topic's, whose guard and exemption read nothing of the body


def leaky(leave_out: str):
    """:func:`produce_inputs` without one of what it reads (a copy that, with nothing left out, gives what it does)."""

    def inputs(scope: ConnectionScope, session: Session, header: RequestHeader) -> Hashable | None:
        read = produce_inputs(scope, session, header)
        volume = scope.quotas.volume
        if read is None:
            if leave_out == "volume past its soft limit" and volume is not None and volume.throttling:
                topic = header.only_topic
                if isinstance(topic, bytes):
                    topic = scope.topics.name_for(uuid.UUID(bytes=topic))
                return header.api_version, topic, session.user
            return None
        version, topic, user = read  # type: ignore[misc]
        return {
            "version": (topic, user),
            "topic": (version, user),
            "user": (version, topic),
            "volume past its soft limit": read,
        }[leave_out]

    return inputs


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize("leave_out", ["version", "topic", "user", "volume past its soft limit"])
def test_each_input_is_needed(monkeypatch, leave_out, planner):
    chain, low, high, _inputs, asks = apis.UNCOUNTED_PLANNING[PRODUCE]  # what plan_request reads of a Produce
    monkeypatch.setitem(apis.UNCOUNTED_PLANNING, PRODUCE, (chain, low, high, leaky(leave_out), asks))
    with pytest.raises(AssertionError):
        run(Proxy(planner), Proxy(always_asking))
