"""Request-rate quotas on the request path, on bytes and values with a fake clock: a request counted against its
client at its header and against the group it names once its body is read, the longer throttle carried, only the
listed APIs counted, Heartbeat never, shadow entries counted and not applied."""

from __future__ import annotations

import json

from config.dynamic import DynamicEntries, effective, entity_key
from config.loader import parse_config
from proxy import apis
from proxy.apis import PASS, ConnectionScope, ForwardRequest, Session, plan_request
from proxy.apis.stages import Stage
from proxy.cluster.topics import Topics
from proxy.codec.apis import FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LIST_OFFSETS, METADATA, OFFSET_COMMIT
from proxy.codec.frame import BUFFER, STREAM
from proxy.codec.header import RequestHeader
from proxy.codec.messages import new_request
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from quota.primitives.entity import DEFAULT
from tests.proxy.byte_rate_scopes import scope_with
from tests.proxy.internal_topic_plans import plan_and_body

SESSION = Session("L", "10.0.0.7")


def join(group: str, version: int = 5):
    return new_request(
        JOIN_GROUP,
        version,
        group_id=group,
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id="",
        protocol_type="consumer",
        protocols=[],
    )


def find(version: int, *keys: str, key_type: int = 0):
    if version >= 4:
        return new_request(FIND_COORDINATOR, version, key_type=key_type, coordinator_keys=list(keys))
    return new_request(FIND_COORDINATOR, version, key=keys[0], key_type=key_type)


def planned(scope, api_key, version, msg, client_id="c"):
    """The request's plan, and its outcome once its body is read (None when it streams)."""
    header, plan, body = plan_and_body(scope, SESSION, api_key, version, msg)
    header = RequestHeader(header.correlation_id, api_key, version, header.header_length, client_id, header.size)
    plan = plan_request(scope, SESSION, header)
    return plan, (plan.decide(body) if plan.action == BUFFER else None)


def test_a_client_over_its_request_rate_is_throttled_at_the_header_and_the_request_streams():
    scope = scope_with([{"entity": {"client-id": "c"}, "request_rate": 1}], ManualClock(1_000_000))
    plans = [planned(scope, METADATA, 9, new_request(METADATA, 9, topics=None))[0] for _ in range(11)]
    assert all(p.throttle is None for p in plans[:10])
    last = plans[10]
    assert last.action == STREAM and last.throttle == Throttle(1000, 1000) and last.throttle.by == "request_rate"


def test_a_group_over_its_quota_is_throttled_whichever_member_and_client_id_asks():
    scope = scope_with([{"entity": {"group": DEFAULT}, "request_rate": 1}], ManualClock(1_000_000))
    outcomes = [planned(scope, JOIN_GROUP, 5, join("storm"), client_id=f"member-{i}")[1] for i in range(11)]
    assert all(isinstance(o, ForwardRequest) and o.throttle is None for o in outcomes[:10])
    assert outcomes[10].throttle == Throttle(1000, 1000)
    assert outcomes[10].throttle.by == "group_request_rate (group storm)"
    long = "g" * 5000
    for _ in range(11):
        outcome = planned(scope, JOIN_GROUP, 5, join(long))[1]
    assert outcome.throttle.by == f"group_request_rate (group {'g' * 117}...)"  # a client's string, cut
    calm = planned(scope, JOIN_GROUP, 5, join("calm"))[1]
    assert calm.throttle is None  # another group has its own quota
    assert calm.usage.group_requests == ((DEFAULT, 1),)  # the usage log's, labelled as the metrics are


def test_the_longer_of_the_client_and_group_throttles_is_carried():
    scope = scope_with(
        [{"entity": {"client-id": "c"}, "request_rate": 2}, {"entity": {"group": "g"}, "request_rate": 1}],
        ManualClock(1_000_000),
    )
    for _ in range(21):
        plan, outcome = planned(scope, OFFSET_COMMIT, 8, new_request(OFFSET_COMMIT, 8, group_id="g", topics=[]))
    assert plan.throttle == Throttle(500, 500)  # the client's: 21 at 2/s
    # the group's: 21 at 1/s is (2.1 - 1) / 1 x 10 s, bounded by quota.request.rate.max.throttle.ms
    assert outcome.throttle == Throttle(2000, 2000)


def test_find_coordinator_counts_each_group_it_asks_for_and_no_transaction():
    scope = scope_with([{"entity": {"group": "g"}, "request_rate": 1}], ManualClock(1_000_000))
    groups = scope.quotas.requests.groups
    planned(scope, FIND_COORDINATOR, 2, find(2, "g"))
    planned(scope, FIND_COORDINATOR, 4, find(4, "g", "g", "other"))
    planned(scope, FIND_COORDINATOR, 4, find(4, "g", key_type=1))  # a transactional id named g: not a group
    assert groups.stats_for("", "g").value_total == 2


def test_only_the_listed_apis_are_counted_and_heartbeat_never_is():
    quotas = [{"entity": {"client-id": "c"}, "request_rate": 1}]
    scope = scope_with(quotas, ManualClock(1_000_000), **{"quota.request.rate.apis": "JoinGroup"})
    for _ in range(50):
        assert planned(scope, METADATA, 9, new_request(METADATA, 9, topics=None))[0].throttle is None
    heartbeat = RequestHeader(1, HEARTBEAT, 4, 10, "c", 40)
    assert all(plan_request(scope, SESSION, heartbeat).throttle is None for _ in range(50))
    assert len(scope.quotas.requests.clients) == 0


def test_a_shadow_group_entry_is_counted_and_noted_not_applied():
    scope = scope_with([{"entity": {"group": "g"}, "request_rate": 1, "mode": "shadow"}], ManualClock(1_000_000))
    for _ in range(11):
        _, outcome = planned(scope, JOIN_GROUP, 5, join("g"))
    assert outcome.throttle is None and outcome.usage.shadow_throttle_ms == 1000
    assert [note.quota for note in outcome.usage.shadows] == ["group_request_rate"]


def test_in_shadow_mode_the_proxy_counts_and_notes_and_applies_nothing():
    quotas = [{"entity": {"client-id": "c"}, "request_rate": 1}]
    scope = scope_with(quotas, ManualClock(1_000_000), **{"quota.mode": "shadow"})
    plans = [planned(scope, METADATA, 9, new_request(METADATA, 9, topics=None))[0] for _ in range(11)]
    assert all(p.throttle is None for p in plans)
    assert plans[10].usage.shadow_throttle_ms == 1000
    assert [note.quota for note in plans[10].usage.shadows] == ["request_rate"]


def test_a_request_rate_set_at_run_time_counts_at_once_and_removed_stops(monkeypatch):
    """A request_rate written to the config topic (as AlterClientQuotas writes it) puts request rate's stage in the
    chains of the APIs it counts at the next request; its tombstone takes it out again, back to the pass-through path
    (proxy.apis.UNCOUNTED_CHAINS), and nothing more is counted."""
    base = parse_config({"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]})
    proxy_quotas = ProxyQuotas(base, ManualClock(1_000_000))
    scope = ConnectionScope(None, Topics(), proxy_quotas.home)
    asked: list[int] = []
    spy = Stage("spy", frozenset({LIST_OFFSETS}), lambda scope, session, header: asked.append(header.api_key))
    chain, *checks = apis.COUNTED_PLANNING[LIST_OFFSETS]  # the table with request rate's stage, seen to be chosen
    monkeypatch.setitem(apis.COUNTED_PLANNING, LIST_OFFSETS, ((spy, *chain), *checks))
    list_offsets, metadata = RequestHeader(1, LIST_OFFSETS, 5, 10, "c", 40), RequestHeader(2, METADATA, 12, 10, "c", 40)
    key = entity_key({"user": DEFAULT})

    assert all(plan_request(scope, SESSION, list_offsets) is PASS for _ in range(20)) and asked == []
    entries = DynamicEntries().with_record(base, key, json.dumps({"request_rate": 1}).encode())
    proxy_quotas.apply(effective(base, entries))
    plans = [plan_request(scope, SESSION, list_offsets) for _ in range(11)]
    assert asked == [LIST_OFFSETS] * 11
    assert all(p.throttle is None for p in plans[:10]) and plans[10].throttle == Throttle(1000, 1000)
    assert plan_request(scope, SESSION, metadata).throttle == Throttle(2000, 2000)  # 12 in 10 s: (1.2 - 1) / 1 x 10 s
    assert scope.quotas.requests.clients.stats_for("ANONYMOUS", "c").value_total == 12

    proxy_quotas.apply(effective(base, entries.with_record(base, key, None)))
    assert all(plan_request(scope, SESSION, list_offsets) is PASS for _ in range(20)) and len(asked) == 11
    assert plan_request(scope, SESSION, metadata) is PASS  # Metadata's chain without it: broker addresses alone
