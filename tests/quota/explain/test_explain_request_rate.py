"""``explain`` of the request-rate quotas on a fake clock: the client's request_rate at its precedence level, a
group's asked about, the throttle a request now would be given, and the quota that muted a connection named."""

from __future__ import annotations

from quota import DEFAULT, ManualClock, QuotaTable, QuotaWindow
from quota.explain.explain import explain
from quota.explain.state import ByteRateSet, QuotaState
from quota.explain.values import SHADOW, THROTTLED, UNLIMITED, WITHIN, OpenConnection, Who
from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.managers.request_rate import RequestRateQuotas
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_RATE
from quota.primitives.group_quotas import group_table

WINDOW = QuotaWindow(11, 1)


def state(values, groups, **kw):
    clock = ManualClock(1_000_000)
    table = QuotaTable.from_values(values)
    requests = RequestRateQuotas(table, groups, frozenset({11}), clock, WINDOW, 5000, 100)
    quota_set = ByteRateSet(
        "",
        ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW),
        ClientQuotaManager(table, CONSUMER_BYTE_RATE, clock, WINDOW),
        ProducerIdQuotaManager(table, window_num=2, window_size_s=10),
    )
    mutations = ControllerMutationQuotaManager(table, clock, WINDOW)
    connections = ConnectionQuotas(["PLAINTEXT"], WINDOW)

    def now(**more) -> QuotaState:
        return QuotaState(
            table, (quota_set,), mutations, connections, ("PLAINTEXT",), clock.now_ms(), requests=requests, **kw, **more
        )

    return requests, now


def finding(explanation, scope):
    found = [f for f in explanation.findings if f.quota == REQUEST_RATE and f.scope == scope]
    assert len(found) == 1, found
    return found[0]


def test_a_client_over_its_request_rate_is_explained_at_its_level_and_asking_makes_nothing():
    requests, now = state([({"user": DEFAULT}, {REQUEST_RATE: 2})], group_table({}))
    alice = Who("alice", "rotating-7", "10.0.0.1")
    before = finding(explain(now(), alice), "user/client-id")
    assert (before.verdict, before.entity, before.level_path) == (WITHIN, "/users/<default>", "/users/<default>")
    assert len(requests.clients) == 0  # asking made no sensor
    for i in range(25):
        requests.record_client("alice", f"rotating-{i}")
    f = finding(explain(now(), alice), "user/client-id")
    assert (f.verdict, f.unit, f.measured, f.limit) == (THROTTLED, "requests/s", 2.5, 2)
    assert f.throttle_ms == 2500  # (2.5 - 2) / 2 x 10 s, what the next request would be given


def test_a_group_asked_about_is_explained_and_the_connection_says_the_group_muted_it():
    requests, now = state([], group_table({"storm": 1, DEFAULT: 5}, shadow=[DEFAULT]))
    for _ in range(12):
        requests.record_group("storm")
    for _ in range(60):
        requests.record_group("other")
    muted = OpenConnection(
        "PLAINTEXT", "10.0.0.1:5", "alice", "MUTED_AND_THROTTLED", 900, 0, "m", "group_request_rate (group storm)"
    )
    who = Who("alice", "m", "10.0.0.1", group="storm")
    explanation = explain(now(open_connections=(muted,), connections_open=1), who)
    f = finding(explanation, "group storm")
    assert (f.verdict, f.entity, f.limit, f.measured) == (THROTTLED, "/groups/storm", 1, 1.2)
    assert f.overridden == ("/groups/<default> = 5",)
    assert finding(explanation, "user/client-id").verdict == UNLIMITED
    assert any("by group_request_rate (group storm)" in reason for reason in explanation.reasons)
    other = finding(explain(now(), Who("bob", "b", "10.0.0.2", group="other")), "group other")
    assert (other.verdict, other.entity) == (SHADOW, "/groups/<default>")
