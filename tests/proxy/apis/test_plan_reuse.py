"""A consumer's Fetch planned once per connection (proxy.apis.reuse) behaves as when every stage is asked each time.

Two connection cores, each with its own proxy (the same configuration, a fake clock each), take the same requests,
answers and configuration changes: one plans with :func:`proxy.apis.plan_request` (the plan reused), the other with a
planner that forgets the connection's reused plan before every request (every stage asked). After each step
everything observable must be the same on both: the bytes each side received, whether the client is read and the next
deadline, the API metrics, the usage log, and every quota's state (consumer byte rates, topic byte rates, request
rates, shadow counts). The steps go through what the reused plan depends on: versions, client ids, a follower's
replica id, a SASL principal, quota tables swapped, shadow mode and back, an entry in shadow mode, a topic quota
added and removed, a request_rate counting Fetch and no longer. Leaving any of those out of the inputs
(:func:`proxy.apis.reuse.fetch_inputs`) makes the two differ.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from config.loader import parse_config
from config.request_rate import api_keys
from proxy.apis import REUSED_CHAINS, ConnectionScope, Session, plan_request
from proxy.apis.plan import Plan
from proxy.apis.reuse import REUSABLE, reusable, reused
from proxy.apis.stages import Stage, chains
from proxy.cluster.broker_ports import BrokerPorts
from proxy.cluster.topics import Topics
from proxy.codec.apis import FETCH, METADATA, PRODUCE
from proxy.codec.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    frame,
    parse_request_header,
)
from proxy.codec.messages import encode_request, encode_response, new_request, new_response
from proxy.connection.request_frames import PLAN_REQUEST
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from tests.proxy.apis.recorded_connection import RecordedConnection
from tests.proxy.byte_rate_scopes import batch

TOPIC, TOPIC_ID = "orders", uuid.UUID("0b6f8f3a-0c1e-4b5e-9a51-3d8b1c6f2e11")
BATCHES = [batch(4, 250, base_offset=4 * i) for i in range(3)]  # about 1.1 KB each
SETTINGS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
DEFAULT_USER = {"entity": {"user": "<default>"}, "consumer_byte_rate": 3000}


def config(*entries: dict, **settings: Any) -> dict:
    return {
        "upstream": {"bootstrap_servers": ["b:1"]},
        "listeners": [{"name": "L", "bind": "h:2"}],
        "quotas": list(entries),
        "settings": {**SETTINGS, **settings},
    }


ENFORCED = config({**DEFAULT_USER, "request_rate": 3})  # request_rate counting its default APIs, not Fetch
ONE_CLIENT = config({"entity": {"client-id": "c1"}, "consumer_byte_rate": 2000})  # c2: no quota any more
NO_CONSUMER_QUOTA = config({"entity": {"user": "<default>"}, "producer_byte_rate": 3000})
SHADOW_ENTRY = config({**DEFAULT_USER, "mode": "shadow"})
TOPIC_QUOTAS = parse_config(config({"entity": {"topic": "<default>"}, "consumer_byte_rate": 2500})).topic_quotas
NO_TOPIC_QUOTAS = parse_config(ENFORCED).topic_quotas
GROUP_QUOTAS = parse_config(ENFORCED).group_quotas  # none


def afresh(scope: ConnectionScope, session: Session, header: RequestHeader):
    """plan_request with nothing reused: the connection's last plan forgotten first, every stage asked."""
    session.reused.clear()
    return plan_request(scope, session, header)


class Proxy(RecordedConnection):
    """One connection through a proxy of its own in cluster mode, between a client and this test as its broker."""

    def __init__(self, planner) -> None:
        self.clock = ManualClock(1_000_000)
        self.quotas = ProxyQuotas(parse_config(ENFORCED), self.clock)
        topics = Topics()
        metadata = new_response(
            METADATA, 12, topics=[{"name": TOPIC, "topic_id": TOPIC_ID, "partitions": [{"partition_index": 0}]}]
        )
        topics.learn_from_metadata(metadata, self.clock.now_ms())  # topic quotas charge it by name, no lookup
        ports = BrokerPorts("L", "proxy.example", 30000, lambda node_id: True)
        self.connect(ConnectionScope(ports, topics, self.quotas.home), planner)

    def fetch(self, version: int, client_id: str, replica_id: int, corr: int) -> None:
        """The client sends a Fetch; once the proxy forwards it (after any mute), the broker answers it with every
        batch (a broker that ignores max_bytes), naming a moved leader every other time."""
        fields: dict[str, Any] = {
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 10 << 20,
            "topics": [
                {
                    "topic": TOPIC,
                    "topic_id": TOPIC_ID,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        }
        if version >= 15:
            fields["replica_state"] = {"replica_id": replica_id, "replica_epoch": -1}
        else:
            fields["replica_id"] = replica_id
        body = encode_request(FETCH, version, new_request(FETCH, version, **fields))
        self.core.client_bytes(memoryview(frame(encode_request_header(FETCH, version, corr, client_id) + body)))
        deadline = self.step()[2]
        while not self.to_broker and deadline is not None:  # muted: the request is read once the mute is over
            self.clock.advance(-(-deadline // 1_000_000) - self.clock.now_ms())
            deadline = self.step()[2]
        self.answer(bytes(self.to_broker), corr)

    def answer(self, request: bytes, corr: int) -> None:
        header = parse_request_header(request, 1 << 20)
        version = header.api_version
        partition = {"partition_index": 0, "high_watermark": 12, "records": b"".join(BATCHES)}
        answer: dict[str, Any] = {"responses": [{"topic": TOPIC, "topic_id": TOPIC_ID, "partitions": [partition]}]}
        if version >= 16 and corr % 2:
            answer["node_endpoints"] = [{"node_id": 2, "host": "broker-2.kafka", "port": 9092, "rack": None}]
        body = encode_response(FETCH, version, new_response(FETCH, version, **answer))
        self.core.broker_bytes(memoryview(frame(encode_response_header(FETCH, version, header.correlation_id) + body)))
        self.step()

    def seen(self) -> dict[str, Any]:
        """Everything observable since the last call (what each side received, the metrics, the usage log) and the
        quotas' state now."""
        now = self.clock.now_ms()
        quotas = self.quotas.home
        seen = {
            "to_broker": bytes(self.to_broker),
            "to_client": bytes(self.to_client),
            "state": self.step(),
            "metrics": list(self.metrics),
            "usage": {
                key: {name: getattr(row, name) for name in type(row).__slots__}
                for key, row in self.usage.take(now * 1_000_000).items()
            },
            "consumer": sorted(map(repr, quotas.fetch.stats(now))),
            "topics": sorted(map(repr, quotas.topics.fetch.stats(now))),
            "requests": sorted(map(repr, quotas.requests.clients.stats(now))),
            "shadows": {quota: list(counts) for quota, counts in quotas.shadows.counts.items()},
            "muted": (self.session.muted_for, self.session.muted_by),
        }
        self.to_broker.clear()
        self.to_client.clear()
        self.metrics.clear()
        return seen


REQUESTS = [  # (version, client id, replica id) of a connection's Fetch requests
    (16, "c2", -1),  # the first after a change: the plan reused before it must not serve it
    (16, "c1", -1),
    (16, "c1", -1),
    (16, "c1", -1),
    (16, "c2", -1),  # another client
    (12, "c1", -1),  # an older version
    (12, "c1", -1),
    (12, "c1", 1),  # a follower's (replica id in the header)
    (12, "c1", -1),
    (4, "c2", -1),
    (4, "c2", -1),
    (16, "c2", -1),
    (16, "c2", -1),
]


def configured(settings: dict):
    return lambda proxy: proxy.quotas.apply(parse_config(settings))


def counting_fetch(counted: bool):
    """A request_rate that starts (stops) counting Fetch, nothing else changed (its client table as it was)."""
    apis = ["Fetch", "Metadata"] if counted else ["Metadata"]
    return lambda proxy: proxy.quotas.requests.reconfigure(GROUP_QUOTAS, api_keys(apis))


CHANGES = [  # each followed by every request of REQUESTS, then 700 ms
    ("enforced", configured(ENFORCED)),
    ("a quota table where c2 has none", configured(ONE_CLIENT)),
    ("enforced again", configured(ENFORCED)),
    ("no consumer_byte_rate at all", configured(NO_CONSUMER_QUOTA)),
    ("enforced again", configured(ENFORCED)),
    ("the proxy switched to shadow mode alone", lambda proxy: proxy.quotas.set_mode("shadow")),
    ("and back to enforce", lambda proxy: proxy.quotas.set_mode("enforce")),
    ("the entry in shadow mode", configured(SHADOW_ENTRY)),
    ("enforced again", configured(ENFORCED)),
    ("a topic quota added alone", lambda proxy: proxy.quotas.topics.update(TOPIC_QUOTAS)),
    ("and removed", lambda proxy: proxy.quotas.topics.update(NO_TOPIC_QUOTAS)),
    ("request_rate counting Fetch", counting_fetch(True)),
    ("and no longer", counting_fetch(False)),
    ("a SASL principal", lambda proxy: proxy.session.authenticated("alice")),
]


# plan_request, and the compiled planner where it is built (proxy/connection/native/planner.c: reused's hit in C),
# which every connection plans with then
PLANNERS = [pytest.param(plan_request, id="python")]
PLANNERS += [] if PLAN_REQUEST is plan_request else [pytest.param(PLAN_REQUEST, id="compiled")]


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_reused_fetch_plan_behaves_as_every_stage_asked_for_each_request(planner):
    reusing, asking = Proxy(planner), Proxy(afresh)
    corr = reused_for = 0
    for change, make in CHANGES:
        for proxy in (reusing, asking):
            make(proxy)
        for request in REQUESTS:
            corr += 1
            for proxy in (reusing, asking):
                proxy.fetch(*request, corr=corr)
            assert reusing.seen() == asking.seen(), (change, request)
            reused_for += reusing.session.reused[FETCH][3]  # planned without asking a stage
            assert not asking.session.reused.get(FETCH, (0, 0, 0, False))[3]
        for proxy in (reusing, asking):
            proxy.clock.advance(700)
        assert reusing.seen() == asking.seen(), change
    assert reused_for >= 60


def test_a_plan_made_for_each_request_is_never_reused():
    """A shadow entry's counting leg (Fetch up to v14) holds what one answer accounted for: its stage makes it anew
    for each request, so the reuse never takes it (the same inputs, but never the same plan twice)."""
    proxy = Proxy(plan_request)
    proxy.quotas.apply(parse_config(SHADOW_ENTRY))
    header = RequestHeader(100, FETCH, 12, 1, "c1", 30)
    plans = [plan_request(proxy.scope, proxy.session, header) for _ in range(3)]
    assert plans[0] is not plans[1] and plans[1] is not plans[2]
    proxy.quotas.apply(parse_config(ENFORCED))
    plans = [plan_request(proxy.scope, proxy.session, header) for _ in range(3)]
    assert plans[0] is plans[1] is plans[2] and proxy.session.reused[FETCH][3]


def test_a_plan_is_reused_only_on_the_listener_it_was_made_for():
    """A connection keeps its listener's scope; were a session planned under another scope (a sidecar listener's,
    where no node endpoint is rewritten), that scope's plan is made, not the last one reused."""
    cluster = Proxy(plan_request)
    sidecar_scope = ConnectionScope(None, cluster.scope.topics, cluster.scope.quotas)
    header = RequestHeader(100, FETCH, 16, 1, "c1", 30)
    session = cluster.session
    made = [plan_request(cluster.scope, session, header) for _ in range(2)]
    assert made[0] is made[1] and session.reused[FETCH][3]
    elsewhere = plan_request(sidecar_scope, session, header)
    assert elsewhere is not made[0] and elsewhere.leg.rewrite is None and made[0].leg.rewrite is not None


def test_the_reused_chains_are_declared_for_exactly_their_stages():
    assert set(REUSED_CHAINS) == {FETCH, PRODUCE}
    for api_key in (FETCH, PRODUCE):
        one_more = chains([*_chain_stages(FETCH), *_chain_stages(PRODUCE), _stage_added(api_key)])
        with pytest.raises(ValueError, match="name the new stages' inputs too"):
            reusable(one_more, REUSABLE)
    both = chains([*_chain_stages(FETCH), *_chain_stages(PRODUCE)])
    assert reusable(both, REUSABLE)[FETCH] is REUSABLE[FETCH].inputs
    assert reusable(both, REUSABLE)[PRODUCE] is REUSABLE[PRODUCE].inputs
    # a stage asked for every request (it records) declared as one whose plan is reused, or not at all: refused
    produce = REUSABLE[PRODUCE]
    for declared in (
        dataclasses.replace(produce, asks=produce.asks[:1]),
        dataclasses.replace(produce, covers=produce.covers + produce.asks[1:], asks=produce.asks[:1]),
        dataclasses.replace(produce, asks=produce.asks[::-1]),
    ):
        with pytest.raises(ValueError, match="name the new stages' inputs too"):
            reusable(both, {**REUSABLE, PRODUCE: declared})


def test_reused_asks_the_stages_until_they_gave_the_same_plan_twice_and_again_when_the_inputs_change():
    asked: list[str] = []
    shared = Plan(throttle=Throttle(5, 5))

    def stage(scope, session, header) -> Plan:
        asked.append(header.client_id)
        return shared

    chain = (Stage("one", frozenset({FETCH}), stage), Stage("two", frozenset({FETCH}), stage))
    session, scope = Session("L", "10.0.0.1"), object()
    header = RequestHeader(100, FETCH, 16, 1, "c1", 30)
    plans = [reused(chain, scope, session, header, inputs) for inputs in "aaabbaaa"]  # type: ignore[arg-type]
    assert len(asked) == 2 * 6  # "a" twice (the second got the same plan), then not; "b" twice; "a" twice again
    assert all(plan is plans[0] for plan in plans)  # the stages' plans, combined once per connection
    assert plans[0] == shared.then(shared, header)


def _chain_stages(api_key: int):
    from proxy.apis import STAGES
    from proxy.apis.request_rate import plan_request_rate

    return [stage for stage in STAGES if api_key in stage.wants and stage.plan is not plan_request_rate]


def _stage_added(api_key: int):
    return Stage("a stage added next month", frozenset({api_key}), lambda scope, session, header: None)
