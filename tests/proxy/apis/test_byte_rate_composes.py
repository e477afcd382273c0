"""The quota stages add to the plan an earlier stage made, never rebuild it field by field (issue 36).

Produce's and Fetch's quota stages come after the address stage in their chains (``proxy.apis.STAGES``). The
byte-rate stage used to copy that plan's ``rewrite`` and ``observe`` into a new ``Plan`` by hand, so any other field
the earlier stage set (``abandon`` here, the field a hold adds; whatever is added next) was silently dropped. Each of
the four ways the stages plan (a throttled Produce, a Produce refused during PAUSE, a Fetch under a consumer quota,
the same in shadow mode) must keep what the earlier stage put there.
"""

from __future__ import annotations

import dataclasses

import pytest

from config.loader import parse_config
from proxy.apis import CHAINS, ConnectionScope, Session
from proxy.apis.plan import ForwardRequest, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.stages import Stage, fold
from proxy.cluster.topics import Topics
from proxy.codec.apis import FETCH, FETCH_REPLICA_STATE_SINCE, PRODUCE, SHARE_FETCH
from proxy.codec.header import RequestHeader
from proxy.codec.messages import encode_request, new_request
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock


def _released() -> None:
    """Stands for whatever an earlier stage reserved and asked to be released if the client goes."""


def _observed(body) -> None:
    """Stands for an earlier stage reading the broker's answer."""


EARLIER = Plan(leg=ResponseLeg(observe=_observed), abandon=_released)


def _planned(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    """The API's chain with its first stage (the addresses') replaced by one that planned :data:`EARLIER`."""
    chain = CHAINS[header.api_key]
    assert chain[0].name == "node endpoints"
    earlier = Stage("earlier", frozenset({header.api_key}), lambda scope, session, header: EARLIER)
    return fold((earlier,) + chain[1:], scope, session, header)


def _scope(quotas, **sections) -> ConnectionScope:
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": quotas,
            **sections,
        }
    )
    return ConnectionScope(None, Topics(), ProxyQuotas(config, ManualClock(1_000_000)).home)


def _kept(plan: Plan) -> None:
    assert plan is not EARLIER  # the stage added something
    assert plan.abandon is _released and plan.leg.observe is _observed, "the earlier stage's fields were dropped"


def test_a_throttled_produce_keeps_the_earlier_plan():
    scope = _scope([{"entity": {"client-id": "p"}, "producer_byte_rate": 1000}])
    session = Session("L", "10.0.0.1")
    _planned(scope, session, RequestHeader(10_000, PRODUCE, 9, 1, "p", 20, 1))  # the burst
    plan = _planned(scope, session, RequestHeader(10_000, PRODUCE, 9, 2, "p", 20, 1))
    assert plan.throttle is not None
    _kept(plan)
    assert dataclasses.replace(plan, throttle=None) == EARLIER  # the throttle is all it added


def test_a_produce_refused_during_pause_keeps_the_earlier_plan():
    scope = _scope([], volume_usage={"missing_data_action": "PAUSE", "produce_base_rate": 1000})
    scope.quotas.volume.brokers({1})  # a live broker without a snapshot: the fail-safe PAUSE
    plan = _planned(scope, Session("L", "10.0.0.1"), RequestHeader(100, PRODUCE, 9, 1, "p", 20, 1))
    assert plan.decide is not None
    _kept(plan)


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
@pytest.mark.parametrize("version", [12, 15])  # before and after the replica id moved into the body (KIP-903)
def test_a_fetch_under_a_consumer_quota_keeps_the_earlier_plan(mode, version):
    scope = _scope([{"entity": {"client-id": "c"}, "consumer_byte_rate": 1000}], settings={"quota.mode": mode})
    assert scope.quotas.mode.shadow == (mode == "shadow")
    plan = _planned(scope, Session("L", "10.0.0.1"), RequestHeader(100, FETCH, version, 1, "c", 20))
    _kept(plan)
    leg = plan.leg
    if version >= FETCH_REPLICA_STATE_SINCE:  # a follower is known from the body: a consumer's forward is charged
        assert leg.record_response is None
        request = encode_request(FETCH, version, new_request(FETCH, version, max_bytes=1 << 20))
        outcome = plan.decide(memoryview(request))  # type: ignore[misc]
        assert isinstance(outcome, ForwardRequest)
        leg = outcome.leg
    assert leg.record_response is not None


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
@pytest.mark.parametrize("topic_quota", [False, True])
def test_a_share_fetch_under_a_consumer_quota_keeps_the_earlier_plan(mode, topic_quota):
    quotas = [{"entity": {"client-id": "c"}, "consumer_byte_rate": 1000}]
    if topic_quota:
        quotas.append({"entity": {"topic": "<default>"}, "consumer_byte_rate": 1000})
    scope = _scope(quotas, settings={"quota.mode": mode})
    plan = _planned(scope, Session("L", "10.0.0.1"), RequestHeader(100, SHARE_FETCH, 1, 1, "c", 20))
    assert plan.leg.record_response is not None
    _kept(plan)
