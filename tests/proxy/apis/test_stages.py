"""Each API's requests planned by a declared chain of stages (proxy.apis.STAGES), folded by Plan.then."""

from __future__ import annotations

from config.loader import parse_config
from proxy.apis import CHAINS, PASS, UNCOUNTED_CHAINS, ConnectionScope, Plan, Session, plan_request
from proxy.apis.stages import END, Stage, fold
from proxy.cluster.topics import Topics
from proxy.codec.apis import HEARTBEAT, LIST_OFFSETS, METADATA, PRODUCE
from proxy.codec.header import RequestHeader
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.decision import Throttle

SESSION = Session("L", "10.0.0.1")
HEADER = RequestHeader(100, PRODUCE, 9, 1, "p", 20, 1)


def test_produce_is_planned_by_its_stages_in_their_declared_order():
    assert [stage.name for stage in CHAINS[PRODUCE]] == [
        "node endpoints",
        "internal-topic guard",
        "internal exemption",
        "volume pause",
        "producer ids",
        "byte rate",
        "topic byte rate",
        "volume rate",
        "request rate",
    ]


def test_an_api_no_stage_wants_stays_on_the_pass_through_path():
    config = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    scope = ConnectionScope(None, Topics(), ProxyQuotas(config).home)
    assert HEARTBEAT not in CHAINS  # never counted by request_rate, whatever quota.request.rate.apis says
    assert plan_request(scope, SESSION, RequestHeader(100, HEARTBEAT, 4, 1, "c", 20)) is PASS
    assert plan_request(scope, SESSION, RequestHeader(100, LIST_OFFSETS, 5, 1, "c", 20)) is PASS  # no request_rate
    assert plan_request(scope, SESSION, HEADER) is PASS  # stages that add nothing leave the fast path too


def test_an_api_no_request_rate_counts_has_its_chain_without_request_rate():
    """UNCOUNTED_CHAINS: what plan_request folds for an API no request_rate quota counts now."""
    assert [stage.name for stage in CHAINS[LIST_OFFSETS]] == ["request rate"] and LIST_OFFSETS not in UNCOUNTED_CHAINS
    assert [stage.name for stage in CHAINS[METADATA]] == ["broker addresses", "volume pause", "request rate"]
    assert [stage.name for stage in UNCOUNTED_CHAINS[METADATA]] == ["broker addresses", "volume pause"]
    for api_key, chain in CHAINS.items():
        lean = tuple(stage for stage in chain if stage.name != "request rate")
        assert UNCOUNTED_CHAINS.get(api_key, ()) == lean


def test_a_stage_ends_the_chain_and_the_later_ones_are_not_asked():
    asked: list[str] = []

    def stage(name: str, plan: Plan | None) -> Stage:
        return Stage(name, frozenset({PRODUCE}), lambda scope, session, header: asked.append(name) or plan)

    chain = (
        stage("nothing to add", None),
        stage("throttles", Plan(throttle=Throttle(5, 5))),
        stage("refuses", Plan(throttle=Throttle(9, 2), last=True)),
        stage("never asked", Plan(throttle=Throttle(100, 100))),
    )
    plan = fold(chain, None, SESSION, HEADER)
    assert asked == ["nothing to add", "throttles", "refuses"]
    assert plan.throttle == Throttle(9, 5) and plan.last
    assert (
        fold((stage("exempt", END), stage("never asked", Plan(throttle=Throttle(1, 1)))), None, SESSION, HEADER) is PASS
    )


def test_the_plans_of_several_stages_are_combined_once_while_the_stages_return_the_same():
    made: list[Plan] = []
    shared = Plan(throttle=Throttle(5, 5))

    def each_request(scope, session, header) -> Plan:
        made.append(Plan(throttle=Throttle(10 + len(made), 1)))
        return made[-1]

    reused = (Stage("a", frozenset({PRODUCE}), lambda *_: shared), Stage("b", frozenset({PRODUCE}), lambda *_: shared))
    session = Session("L", "10.0.0.1")
    first = fold(reused, None, session, HEADER)  # type: ignore[arg-type]
    assert fold(reused, None, session, HEADER) is first  # the same plans: their combination reused
    assert first == shared.then(shared, HEADER)
    other_version = RequestHeader(100, PRODUCE, 8, 2, "p", 20, 1)
    assert fold(reused, None, session, other_version) is not first  # another version is combined anew
    assert fold(reused, None, Session("L", "10.0.0.2"), HEADER) is not first  # and another connection's

    fresh = (reused[0], Stage("c", frozenset({PRODUCE}), each_request))
    plans = [fold(fresh, None, session, HEADER) for _ in range(2)]  # type: ignore[arg-type]
    assert plans[0] is not plans[1]  # a stage's plan made for each request: combined for each
    assert [plan.throttle for plan in plans] == [Throttle(10, 5), Throttle(11, 5)] and len(made) == 2
