"""``explain`` on a fake clock: the matching entry and its precedence level, the rate measured against it, the
throttle in force (the one the manager gives a record made now), the proxy-wide states; and that asking changes
nothing (no sensor, bucket or IP rate is made)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from quota import DEFAULT, ManualClock, QuotaTable, QuotaWindow
from quota.explain.explain import explain
from quota.explain.state import ByteRateSet, QuotaState, VolumeView
from quota.explain.values import (
    BROKER,
    FULL,
    NOT_THROTTLED,
    PAUSED,
    SHADOW,
    THROTTLED,
    UNLIMITED,
    WITHIN,
    OpenConnection,
    Who,
    as_json,
)
from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import ConnectionLimits, ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import HOLD, ProducerIdQuotaManager
from quota.managers.volume import PAUSE, VolumeState
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    REQUEST_PERCENTAGE,
)

WINDOW = QuotaWindow(11, 1)
ALICE = Who("alice", "etl", "10.0.0.1")


class Proxy:
    """The managers of one proxy on a fake clock, and the state explain reads from them."""

    def __init__(
        self,
        values,
        limits: ConnectionLimits = ConnectionLimits(),
        max_tracked: int = 100,
        enforcement: str = "throttle",
    ) -> None:
        self.clock = ManualClock(1_000_000)
        self.table = QuotaTable.from_values(values)
        self.produce = ClientQuotaManager(
            self.table, PRODUCER_BYTE_RATE, self.clock, WINDOW, max_tracked_entities=max_tracked
        )
        self.fetch = ClientQuotaManager(self.table, CONSUMER_BYTE_RATE, self.clock, WINDOW)
        self.pids = ProducerIdQuotaManager(self.table, window_num=2, window_size_s=10, enforcement=enforcement)
        self.mutations = ControllerMutationQuotaManager(self.table, self.clock, WINDOW)
        self.connections = ConnectionQuotas(["PLAINTEXT"], WINDOW, limits)

    def state(self, **kw) -> QuotaState:
        return QuotaState(
            self.table,
            (ByteRateSet("", self.produce, self.fetch, self.pids),),
            self.mutations,
            self.connections,
            ("PLAINTEXT",),
            self.clock.now_ms(),
            **kw,
        )

    def finding(self, explanation, quota, scope=None):
        found = [f for f in explanation.findings if f.quota == quota and (scope is None or f.scope == scope)]
        assert len(found) == 1, found
        return found[0]


def test_the_most_specific_entry_matches_at_its_level_and_the_others_are_named_as_overridden():
    p = Proxy(
        [
            ({"user": "alice", "client-id": "etl"}, {PRODUCER_BYTE_RATE: 1000}),
            ({"user": DEFAULT}, {PRODUCER_BYTE_RATE: 5000}),
            ({"client-id": DEFAULT}, {PRODUCER_BYTE_RATE: 9000}),
        ]
    )
    f = p.finding(explain(p.state(), ALICE), PRODUCER_BYTE_RATE)
    assert (f.entity, f.level, f.level_path, f.limit) == (
        "/users/alice/clients/etl",
        1,
        "/users/<user>/clients/<client-id>",
        1000,
    )
    assert f.overridden == ("/users/<default> = 5000", "/clients/<default> = 9000")
    bob = p.finding(explain(p.state(), Who("bob", "etl", "10.0.0.1")), PRODUCER_BYTE_RATE)
    assert (bob.entity, bob.level, bob.level_path, bob.limit) == ("/users/<default>", 6, "/users/<default>", 5000)
    # A client no entry matches is limited by nothing.
    q = Proxy([({"user": "carol"}, {PRODUCER_BYTE_RATE: 1000})])
    assert q.finding(explain(q.state(), ALICE), PRODUCER_BYTE_RATE).verdict == UNLIMITED


def test_a_client_over_its_rate_is_throttled_for_what_a_record_now_is_given():
    p = Proxy([({"client-id": "etl"}, {PRODUCER_BYTE_RATE: 1000})])
    p.produce.record_and_get_throttle_time_ms("alice", "etl", 10_000)
    p.clock.advance(200)
    p.produce.record_and_get_throttle_time_ms("alice", "etl", 5_000)  # 15,000 B over 10.5 s (Kafka pads)
    p.clock.advance(300)
    explanation = explain(p.state(), ALICE)
    f = p.finding(explanation, PRODUCER_BYTE_RATE)
    assert (f.verdict, f.entity, f.level, f.counted_in) == (THROTTLED, "/clients/etl", 7, 'user="" client-id="etl"')
    assert f.measured == pytest.approx(15_000 / 10.5)
    assert f.recent_throttle_ms > 0
    assert explanation.verdict == THROTTLED and any(r.startswith("producer_byte_rate") for r in explanation.reasons)
    # The manager gives a record made now exactly the throttle the explanation says is in force.
    assert f.throttle_ms == p.produce.record_and_get_throttle_time_ms("alice", "etl", 0) > 0


def test_asking_about_a_client_makes_no_sensor_and_says_it_is_not_throttled():
    p = Proxy(
        [
            ({"user": DEFAULT}, {PRODUCER_BYTE_RATE: 1000, CONTROLLER_MUTATION_RATE: 5, PRODUCER_IDS_RATE: 10}),
            ({"ip": DEFAULT}, {}),
        ][:1],
        ConnectionLimits(ip_rates=MappingProxyType({DEFAULT: 5.0})),
    )
    explanation = explain(p.state(), ALICE)
    assert explanation.verdict == NOT_THROTTLED and explanation.reasons == ()
    assert {f.verdict for f in explanation.findings} <= {WITHIN, UNLIMITED, BROKER}
    assert p.finding(explanation, REQUEST_PERCENTAGE).verdict == BROKER
    assert (len(p.produce), len(p.fetch), len(p.mutations), len(p.pids), p.connections.tracked_ips) == (0, 0, 0, 0, 0)
    assert as_json(explanation)["who"] == {
        "user": "alice",
        "client_id": "etl",
        "ip": "10.0.0.1",
        "listener": None,
        "topic": None,
        "group": None,
        "partition": None,
    }


def test_an_entity_past_the_tracked_cap_has_its_own_sensor_and_a_new_one_is_told_how_it_starts():
    p = Proxy([({"client-id": DEFAULT}, {PRODUCER_BYTE_RATE: 1000})], max_tracked=1)
    p.produce.record_and_get_throttle_time_ms("alice", "first", 100)
    p.produce.record_and_get_throttle_time_ms("alice", "etl", 100)  # the table is full: "first" evicted for it
    f = p.finding(explain(p.state(), ALICE), PRODUCER_BYTE_RATE)
    assert not f.overflow and f.counted_in == 'user="" client-id="etl"'
    fresh = p.finding(explain(p.state(), Who("alice", "never-seen", "10.0.0.1")), PRODUCER_BYTE_RATE)
    assert any("without a fresh burst" in note for note in fresh.notes)
    assert explain(p.state(), ALICE).proxy.tracked[PRODUCER_BYTE_RATE] == [1, 1]


def test_a_producer_id_user_past_the_tracked_cap_is_told_how_it_starts():
    """Past quota.max.tracked.entities a new producer-id user evicts one and starts with one token (issue 44): it
    used to be told it was counted in the <overflow> user."""
    p = Proxy([({"user": DEFAULT}, {PRODUCER_IDS_RATE: 2})])
    p.pids.max_tracked_entities = 1
    p.pids.record_and_decide("bob", 1, p.clock.now_ms())
    p.pids.record_and_decide("alice", 2, p.clock.now_ms())  # the table is full: bob evicted for her
    f = p.finding(explain(p.state(), ALICE), PRODUCER_IDS_RATE)
    assert not f.overflow and f.counted_in == 'user="alice" client-id=""' and f.tokens == 0
    fresh = p.finding(explain(p.state(), Who("carol", "etl", "10.0.0.1")), PRODUCER_IDS_RATE)
    assert any("starts with one token" in note for note in fresh.notes), fresh.notes


def test_a_shadow_entry_over_its_rate_would_throttle_and_does_not():
    p = Proxy([({"client-id": "etl"}, {PRODUCER_BYTE_RATE: 100}, True)])
    p.produce.record_and_get_throttle_time_ms("alice", "etl", 10_000)
    explanation = explain(p.state(), ALICE)
    f = p.finding(explanation, PRODUCER_BYTE_RATE)
    assert (f.verdict, f.shadow) == (SHADOW, True) and f.throttle_ms > 0
    assert explanation.verdict == NOT_THROTTLED and "shadow" in explanation.reasons[0]
    assert explain(p.state(shadow_mode=True), ALICE).proxy.shadow_mode


def test_bucket_quotas_say_their_debt_and_the_ids_held():
    p = Proxy([({"user": "alice"}, {CONTROLLER_MUTATION_RATE: 5, PRODUCER_IDS_RATE: 2})], enforcement=HOLD)
    p.mutations.record_and_decide("alice", "etl", 5 * 11 + 10)  # 10 past the burst: 2 s of debt
    for pid in range(6):  # burst 2 x 2 = 4, then held
        p.pids.record_and_decide("alice", pid, p.clock.now_ms())
    explanation = explain(p.state(), ALICE)
    m = p.finding(explanation, CONTROLLER_MUTATION_RATE)
    assert (m.verdict, m.tokens, m.burst, m.throttle_ms) == (THROTTLED, -10, 55, 2000)
    ids = p.finding(explanation, PRODUCER_IDS_RATE)
    assert (ids.verdict, ids.level, ids.tokens) == (THROTTLED, 3, -2)
    assert ids.throttle_ms == 10_000 and any("2 new producer id(s) held" in n for n in ids.notes)


def test_connection_quotas_by_ip_listener_and_proxy():
    p = Proxy(
        [],
        ConnectionLimits(
            ip_rates=MappingProxyType({"10.0.0.1": 2.0}),
            max_connections_per_ip=1,
            listener_creation_rates=MappingProxyType({"PLAINTEXT": 100.0}),
        ),
    )
    now = p.clock.now_ms()
    for _ in range(20):  # 20 connections in one go: 2/s over the 10 s minimum window
        p.connections.accept_delay_ms("PLAINTEXT", now)
        p.connections.admit("PLAINTEXT", "10.0.0.1", now)
    explanation = explain(p.state(), ALICE)
    rate = p.finding(explanation, "connection_creation_rate", "ip")
    assert (rate.verdict, rate.entity, rate.limit, rate.measured) == (THROTTLED, "/ips/10.0.0.1", 2.0, 2.0)
    assert rate.throttle_ms > 0
    count = p.finding(explanation, "max_connections", "ip")
    assert (count.verdict, count.limit, count.measured) == (FULL, 1, 1)
    assert p.finding(explanation, "connection_creation_rate", "listener PLAINTEXT").verdict == WITHIN
    assert p.finding(explanation, "max_connections", "proxy-wide").verdict == UNLIMITED
    other = explain(p.state(), Who("alice", "etl", "10.0.0.2"))
    assert p.finding(other, "connection_creation_rate", "ip").verdict == UNLIMITED


def test_proxy_wide_states_take_part():
    p = Proxy([({"client-id": "etl"}, {PRODUCER_BYTE_RATE: 1000})])
    paused = VolumeView(VolumeState(PAUSE, 0.0, (2,), (), 0, 0.0, 0, 0, {1: 900_000}, None), p.produce, 60_000, PAUSE)
    explanation = explain(p.state(volume=paused, wall_ms=1_000_000), ALICE)
    assert explanation.verdict == PAUSED and explanation.reasons[0].startswith("volume usage PAUSE")
    assert explanation.proxy.volume.snapshot_age_ms == {"1": 100_000}
    assert explanation.proxy.volume.missing_data == (2,)
    muted = OpenConnection("PLAINTEXT", "10.0.0.1:5000", "alice", "MUTED_AND_THROTTLED", 700, 0, "etl")
    other = OpenConnection("PLAINTEXT", "10.0.0.1:5001", "alice", "MUTED_AND_THROTTLED", 900, 0, "other")
    assert explain(p.state(open_connections=(other,), connections_open=1), ALICE).verdict == NOT_THROTTLED
    explanation = explain(p.state(open_connections=(muted,), connections_open=1), ALICE)
    assert explanation.verdict == THROTTLED and "muted 700 ms more" in explanation.reasons[0]
    assert "2 workers" in explain(p.state(workers=2), ALICE).proxy.cluster


def test_an_ip_past_the_tracked_cap_is_told_how_it_starts_and_the_internal_listener_is_exempt():
    p = Proxy(
        [],
        ConnectionLimits(
            ip_rates=MappingProxyType({DEFAULT: 100.0}),
            max_connection_creation_rate=100.0,
            internal_listener="PLAINTEXT",
        ),
    )
    p.connections.max_tracked_entities = 1
    assert "is full" not in " ".join(p.finding(explain(p.state(), ALICE), "connection_creation_rate", "ip").notes)
    p.connections.admit("PLAINTEXT", "10.0.0.9", p.clock.now_ms())  # the one IP tracked
    ip = p.finding(explain(p.state(), ALICE), "connection_creation_rate", "ip")
    assert any("without a fresh allowance" in note for note in ip.notes)
    # Asked about the internal listener alone (of two), the proxy-wide limits do not hold it; about any, they do.
    p.connections = ConnectionQuotas(["PLAINTEXT", "OTHER"], WINDOW, p.connections.limits)
    state = QuotaState(
        p.table,
        (ByteRateSet("", p.produce, p.fetch, p.pids),),
        p.mutations,
        p.connections,
        ("PLAINTEXT", "OTHER"),
        p.clock.now_ms(),
    )
    internal = explain(state, Who("alice", "etl", "10.0.0.1", "PLAINTEXT"))
    assert not [f for f in internal.findings if f.scope == "proxy-wide"]
    anywhere = explain(state, ALICE)
    assert p.finding(anywhere, "connection_creation_rate", "proxy-wide").limit == 100.0


def test_with_smoothing_the_throttle_said_is_the_one_the_bucket_gives_a_record_now():
    p = Proxy([({"client-id": "etl"}, {PRODUCER_BYTE_RATE: 1000})])
    p.produce.smoothing = True
    p.produce.record_and_get_throttle_time_ms("alice", "etl", 20_000)  # past the burst of 11 s: a debt
    p.clock.advance(250)
    f = p.finding(explain(p.state(), ALICE), PRODUCER_BYTE_RATE)
    assert f.verdict == THROTTLED and any("smoothing" in n for n in f.notes)
    assert f.throttle_ms == p.produce.record_and_get_throttle_time_ms("alice", "etl", 0) > 0


def test_a_mutation_debt_said_is_the_throttle_the_next_request_gets():
    p = Proxy([({"client-id": "etl"}, {CONTROLLER_MUTATION_RATE: 2})])
    p.mutations.record_and_decide("alice", "etl", 2 * 11 + 7)
    p.clock.advance(1500)  # 3 tokens back: a debt of 4, 2 s
    f = p.finding(explain(p.state(), ALICE), CONTROLLER_MUTATION_RATE)
    assert (f.verdict, f.tokens, f.throttle_ms) == (THROTTLED, -4, 2000)
    assert p.mutations.admit("alice", "etl", [1]).throttle.throttle_time_ms == f.throttle_ms


def test_each_brokers_budget_is_explained_and_the_cluster_budget_is_said():
    from quota.sharing.cluster_peers import PeerView

    p = Proxy([({"client-id": "etl"}, {PRODUCER_BYTE_RATE: 1000})])
    broker = ClientQuotaManager(p.table, PRODUCER_BYTE_RATE, p.clock, WINDOW)
    broker.record_and_get_throttle_time_ms("alice", "etl", 50_000)
    sets = (ByteRateSet("bootstrap", p.produce, p.fetch, p.pids), ByteRateSet("7", broker, p.fetch, p.pids))
    state = QuotaState(p.table, sets, p.mutations, p.connections, ("PLAINTEXT",), p.clock.now_ms(), cluster_mode=True)
    explanation = explain(state, ALICE)
    assert p.finding(explanation, PRODUCER_BYTE_RATE, "user/client-id broker bootstrap").verdict == WITHIN
    assert p.finding(explanation, PRODUCER_BYTE_RATE, "user/client-id broker 7").verdict == THROTTLED
    assert "each broker's port keeps its own budget" in explanation.proxy.cluster
    fallback = explain(p.state(scope="cluster", cluster_peers=PeerView(0, 2, True)), ALICE).proxy.cluster
    assert "no peer sidecar fresh (2 known): keeping to quota / 3" in fallback
    shared = explain(p.state(scope="cluster", cluster_peers=PeerView(2, 2, False)), ALICE).proxy.cluster
    assert "one budget with 2 fresh peer sidecar(s) of 2 known" in shared and "topic" not in shared


def test_topic_quotas_kept_per_sidecar_are_said():
    from quota.managers.topic_quota import TopicQuotas
    from quota.primitives.topic_quotas import topic_table
    from quota.sharing.cluster_peers import PeerView

    p = Proxy([])
    topics = TopicQuotas(topic_table({"orders": {PRODUCER_BYTE_RATE: 1000}}), p.clock, WINDOW, 25_000, 100)
    fresh = PeerView(2, 2, False)
    held = explain(p.state(scope="cluster", cluster_peers=fresh, topics=topics, topics_shared=False), ALICE)
    assert "topic quotas kept per sidecar: a live sidecar does not read topic usage" in held.proxy.cluster
    shared = explain(p.state(scope="cluster", cluster_peers=fresh, topics=topics, topics_shared=True), ALICE)
    assert "topic" not in shared.proxy.cluster


def test_a_topic_asked_about_has_its_quotas_explained_and_a_connection_says_which_quota_muted_it():
    from quota.managers.topic_quota import TopicQuotas
    from quota.primitives.topic_quotas import topic_table

    p = Proxy([])
    topics = TopicQuotas(
        topic_table({"orders": {PRODUCER_BYTE_RATE: 1000}, DEFAULT: {PRODUCER_BYTE_RATE: 50_000}}),
        p.clock,
        WINDOW,
        25_000,
        100,
    )
    for _ in range(3):
        topics.produce.record_topic("orders", 6000)
    muted = OpenConnection("PLAINTEXT", "10.0.0.1:5", "alice", "MUTED_AND_THROTTLED", 900, 0, "etl", "by-me")
    who = Who("alice", "etl", "10.0.0.1", topic="orders")
    explanation = explain(p.state(topics=topics, open_connections=(muted,), connections_open=1), who)
    f = p.finding(explanation, PRODUCER_BYTE_RATE, "topic orders")
    assert (f.verdict, f.entity, f.limit, f.level) == (THROTTLED, "/topics/orders", 1000, None)
    assert f.measured == 1800 and f.throttle_ms > 0 and f.overridden == ("/topics/<default> = 50000",)
    assert p.finding(explanation, CONSUMER_BYTE_RATE, "topic orders").verdict == UNLIMITED
    assert explanation.verdict == THROTTLED
    assert any("by by-me" in reason for reason in explanation.reasons)
    assert len(topics.produce) == 1  # asking made nothing
    plain = explain(p.state(topics=topics), ALICE)  # no topic asked: none explained
    assert not [f for f in plain.findings if f.scope.startswith("topic")]
    assert not any("on_exceed" in note for note in f.notes)
    topics.update(topic_table({"orders": {PRODUCER_BYTE_RATE: 1000}}, reject=["orders"]))
    rejecting = p.finding(explain(p.state(topics=topics), who), PRODUCER_BYTE_RATE, "topic orders")
    assert any(note.startswith("on_exceed: reject") for note in rejecting.notes)


def test_a_partition_asked_about_has_its_quotas_explained_beside_its_topics_and_asking_makes_nothing():
    from quota.managers.topic_quota import TopicQuotas
    from quota.primitives.topic_quotas import topic_table

    p = Proxy([])
    table = topic_table(
        {"orders": {PRODUCER_BYTE_RATE: 50_000}, ("orders", DEFAULT): {PRODUCER_BYTE_RATE: 1000}},
        reject=[("orders", DEFAULT)],
    )
    topics = TopicQuotas(table, p.clock, WINDOW, 25_000, 100)
    for _ in range(3):
        topics.partition_produce.record_topic(("orders", 2), 6000)
    who = Who("alice", "etl", "10.0.0.1", topic="orders", partition=2)
    explanation = explain(p.state(topics=topics), who)
    f = p.finding(explanation, PRODUCER_BYTE_RATE, "partition orders/2")
    assert (f.verdict, f.entity, f.limit, f.level) == (THROTTLED, "/topics/orders/partitions/<default>", 1000, None)
    assert f.measured == 1800 and any(note.startswith("on_exceed: reject") for note in f.notes)
    assert p.finding(explanation, PRODUCER_BYTE_RATE, "topic orders").limit == 50_000  # the topic's beside it
    cold = explain(p.state(topics=topics), Who("alice", "etl", "10.0.0.1", topic="orders", partition=5))
    assert p.finding(cold, PRODUCER_BYTE_RATE, "partition orders/5").verdict != THROTTLED
    assert len(topics.partition_produce) == 1  # asking made nothing
