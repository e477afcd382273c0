"""Quota groups: one budget for several users or client ids, where they stand among Kafka's eight levels, and a
hostile tenant trying to get out of its group's budget (fake clock throughout)."""

import math

import pytest

from quota import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    FORWARD,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    ClientQuotaManager,
    ManualClock,
    QuotaWindow,
    is_applied,
)
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.managers.request_rate import RequestRateQuotas
from quota.primitives.entity import REQUEST_RATE, QuotaEntity, QuotaEntry
from quota.primitives.group_quotas import EMPTY_GROUP_TABLE
from quota.primitives.quota_groups import (
    QuotaGroupEntity,
    QuotaGroups,
    group_of_tags,
    principal_name,
    quota_group,
)
from quota.primitives.quota_table import QuotaTable

P, C = PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE


def table(entries=(), *groups) -> QuotaTable:
    built = [QuotaEntry(QuotaEntity.from_dict(entity), quotas) for entity, quotas in entries]
    return QuotaTable(built, QuotaGroups(groups))


ETL = quota_group("etl", {P: 1000}, users=["alice", "bob"])
JOBS = quota_group("jobs", {C: 2000, P: 500}, client_id_prefix="job-")
JOBS_EU = quota_group("jobs-eu", {C: 3000}, client_id_prefix="job-eu-")
LOADERS = quota_group("loaders", {C: 4000}, client_ids=["job-eu-loader"])


def test_a_group_of_users_stands_below_the_user_and_above_the_default_user():
    t = table(
        [({"user": "bob"}, {P: 7}), ({"user": DEFAULT}, {P: 9}), ({"user": DEFAULT, "client-id": "x"}, {P: 11})], ETL
    )
    assert t.resolve(P, "bob", "x").limit == 7  # /users/bob beats the group
    alice = t.resolve(P, "alice", "x")  # the group beats /users/<default>/clients/x and /users/<default>
    assert (alice.limit, alice.entity, group_of_tags(alice.tags)) == (1000, QuotaGroupEntity.of("etl"), "etl")
    assert alice.entity.path == "/quota-groups/etl"
    assert t.resolve(P, "carol", "x").limit == 11  # not a member
    assert t.resolve(P, "alice", "x").tags == t.resolve(P, "alice", "other").tags  # every client of every member


def test_a_group_of_client_ids_stands_below_the_client_id_and_above_the_default_client_id():
    t = table([({"client-id": "job-7"}, {C: 7}), ({"client-id": DEFAULT}, {C: 9})], JOBS, JOBS_EU, LOADERS)
    assert t.resolve(C, "u", "job-7").limit == 7  # /clients/job-7 beats the group
    assert t.resolve(C, "u", "job-1").limit == 2000
    assert t.resolve(C, "u", "job-eu-1").limit == 3000  # the longest prefix wins
    assert t.resolve(C, "u", "job-eu-loader").limit == 4000  # a client id named in a group beats any prefix
    assert t.resolve(C, "u", "job").limit == 9  # shorter than the prefix: /clients/<default>
    # A client is in one group, the longest prefix's: jobs-eu sets no producer_byte_rate, so none of jobs's applies
    assert math.isinf(t.resolve(P, "u", "job-eu-1").limit) and t.resolve(P, "u", "job-1").limit == 500


def test_kafka_levels_of_users_still_beat_a_group_of_client_ids():
    """As Kafka: any user level beats a client-id-only level; a group of client ids is one of those."""
    t = table([({"user": DEFAULT}, {C: 9})], JOBS)
    assert t.resolve(C, "u", "job-1").limit == 9
    assert [m.limit for m in t.matches(C, "u", "job-1")] == [9, 2000]  # explain shows the shadowed group


def test_the_tags_of_a_group_resolve_to_it_and_no_client_can_name_itself_into_one():
    t = table([({"user": DEFAULT}, {P: 9}), ({"client-id": DEFAULT}, {C: 9})], ETL, JOBS)
    tags = t.resolve(P, "alice", "x").tags
    assert t.resolve(P, *tags).tags == tags  # a peer's usage, named by the group's tags, goes to the group
    assert t.resolve(C, *t.resolve(C, "u", "job-1").tags).limit == 2000
    assert principal_name("\x00etl") != "\x00etl"  # a principal never carries a group's mark
    for user, client_id in (("etl", ""), ("", "etl"), ("/quota-groups/etl", ""), ("\ufffdetl", "")):
        assert group_of_tags(t.resolve(P, user, client_id).tags) is None
    with pytest.raises(ValueError, match="NUL"):
        table([({"user": "\x00etl"}, {P: 1})])
    with pytest.raises(ValueError, match="NUL"):
        t.with_changes({QuotaEntity("\x00etl"): QuotaEntry(QuotaEntity("\x00etl"), {P: 1})})


def test_a_name_in_two_groups_is_an_error_naming_both():
    with pytest.raises(ValueError, match=r"/quota-groups/b: user 'bob' is already in /quota-groups/etl"):
        QuotaGroups([ETL, quota_group("b", {P: 1}, users=["bob"])])
    with pytest.raises(ValueError, match="job-.*already in /quota-groups/jobs"):
        QuotaGroups([JOBS, quota_group("b", {P: 1}, client_id_prefix="job-")])
    with pytest.raises(ValueError, match="configured more than once"):
        QuotaGroups([ETL, quota_group("etl", {P: 1}, client_ids=["x"])])


def test_groups_survive_a_dynamic_change_and_only_groups_may_set_a_key():
    t = table([], ETL).with_changes({QuotaEntity("carol"): QuotaEntry(QuotaEntity("carol"), {C: 5})})
    assert t.resolve(P, "alice", "x").limit == 1000 and t.resolve(C, "carol", "x").limit == 5
    assert P in t.keys() and t.tag_parts(P) == {(False, True)}  # everyone else: ("", client_id), unlimited
    assert math.isinf(t.resolve(P, "carol", "x").limit)


def test_two_client_ids_of_one_group_share_one_budget_and_a_bystander_keeps_its_own():
    clock = ManualClock()
    window = QuotaWindow(num=11, size_seconds=1)
    t = table([({"client-id": DEFAULT}, {P: 1000})], quota_group("pair", {P: 1000}, client_ids=["a", "b"]))
    m = ClientQuotaManager(t, P, clock, window)
    sent = {"a": 0, "b": 0, "c": 0}
    muted_until = {"a": 0, "b": 0, "c": 0}
    for _ in range(60_000 // 50):  # each client sends 100 bytes every 50 ms it is not muted, for 60 s
        for client in sent:
            if clock.now_ms() >= muted_until[client]:
                sent[client] += 100
                muted_until[client] = clock.now_ms() + m.record_and_get_throttle_time_ms("u", client, 100)
        clock.advance(50)
    pair_rate, bystander_rate = (sent["a"] + sent["b"]) / 60, sent["c"] / 60
    assert 0.9 * 1000 <= pair_rate <= 1.15 * 1000  # one budget between a and b, not one each
    assert 0.9 * 1000 <= bystander_rate <= 1.15 * 1000  # c, under /clients/<default>, has its own
    assert m.stats_for("u", "a").tags == m.stats_for("u", "b").tags


def test_a_rotating_client_id_under_a_prefix_group_stays_in_its_budget():
    clock = ManualClock()
    t = table([({"client-id": DEFAULT}, {P: 1000})], JOBS)
    m = ClientQuotaManager(t, P, clock, QuotaWindow(num=11, size_seconds=1))
    sent, muted_until = 0, 0
    for i in range(60_000 // 50):
        if clock.now_ms() >= muted_until:
            sent += 100
            muted_until = clock.now_ms() + m.record_and_get_throttle_time_ms("u", f"job-{i}", 100)
        clock.advance(50)
    assert 0.9 * 500 <= sent / 60 <= 1.15 * 500  # the group's 500 B/s, not /clients/<default>'s 1000 per id
    assert len(m.keeper) == 1  # one sensor, however many ids


def test_every_kind_shares_the_group_budget():
    clock = ManualClock()
    group = quota_group("etl", {CONTROLLER_MUTATION_RATE: 1, PRODUCER_IDS_RATE: 2, REQUEST_RATE: 1}, users=["a", "b"])
    t = table([({"user": DEFAULT}, {CONTROLLER_MUTATION_RATE: 100, PRODUCER_IDS_RATE: 100})], group)
    mutations = ControllerMutationQuotaManager(t, clock, QuotaWindow(num=11, size_seconds=1))
    burst = mutations.tokens("a", "x")
    assert mutations.admit("a", "x", [int(burst) + 1]).all_admitted  # KIP-599: admitted while not below zero
    assert not mutations.admit("b", "y", [5]).all_admitted  # b's bucket is a's
    assert mutations.admit("c", "y", [5]).all_admitted  # c is under /users/<default>
    pids = ProducerIdQuotaManager(t, window_num=2, window_size_s=10, enforcement="throttle")
    decided = [pids.record_and_decide(user, pid, 0) for user, pid in zip("ababa", range(5))]
    assert decided[:4] == [FORWARD] * 4 and decided[4] != FORWARD  # 2 x 2 ids of burst, shared by a and b
    assert pids.record_and_decide("c", 9, 0) == FORWARD
    requests = RequestRateQuotas(
        t, EMPTY_GROUP_TABLE, frozenset({3}), clock, QuotaWindow(num=11, size_seconds=1), 5000, 100
    )
    for _ in range(11):
        requests.record_client("a", "x")
    assert requests.record_client("b", "y") != FORWARD  # a's requests used b's budget: one group
    assert requests.record_client("c", "y") == FORWARD


def test_explain_and_metrics_name_the_group_not_its_members():
    from proxy.ops.metric_labels import label, tag_labels
    from quota.explain.client_quotas import entry_fields, tags_text

    t = table([({"user": DEFAULT}, {P: 9})], ETL, JOBS)
    fields = entry_fields(t.matches(P, "alice", "x"))
    assert (fields["entity"], fields["level"], fields["overridden"]) == (
        "/quota-groups/etl",
        3,
        ("/users/<default> = 9",),
    )
    assert fields["level_path"] == "a quota group of users, after level 3 (/users/<user>)"
    assert "after level 7 (/clients/<client-id>)" in entry_fields(t.matches(C, "u", "job-1"))["level_path"]
    tags = t.resolve(P, "alice", "x").tags
    assert tags_text(tags) == 'quota-group="etl"' and tag_labels(tags) == ("<quota-group:etl>", "")
    assert tag_labels(t.resolve(C, "carol", "\x00etl").tags)[1] != "<quota-group:etl>"  # nor can a client id
    assert QuotaGroups([ETL, JOBS]).name_of("bob", "job-1") == "etl"  # the usage log's quota_group
    assert QuotaGroups([ETL, JOBS]).name_of("carol", "job-1") == "jobs"
    assert label("<quota-group:etl>") != "<quota-group:etl>"  # a principal named so gets a series of its own


def test_a_groups_usage_reaches_a_peer_through_the_encoding_and_counts_in_its_group():
    """Two workers (or sidecars): client a on one, b on the other, one group; each one's usage, encoded as it
    travels, lands in the other's group sensor, so both decide on the total."""
    from quota.sharing.usage_encoding import decode, encode
    from quota.sharing.usage_share import UsageTap

    clock = ManualClock(0)
    t = table([({"client-id": DEFAULT}, {P: 1000})], quota_group("pair", {P: 1000}, client_ids=["a", "b"]))
    one, two = (ClientQuotaManager(t, P, clock, QuotaWindow(11, 1)) for _ in range(2))
    one.tap, two.tap = UsageTap(), UsageTap()
    one.record_no_throttle("u", "a", 700)
    two.record_no_throttle("u", "b", 700)
    for sender, receiver in ((one, two), (two, one)):
        delta = decode(encode(sender.tap.take("w", "3")))
        receiver.record_remote_rows(*zip(*delta.produce), clock.now_ms())
    for manager, client_id in ((one, "a"), (two, "b")):
        stats = manager.stats_for("u", client_id)
        assert group_of_tags(stats.tags) == "pair" and stats.rate == pytest.approx(1400 / 10)  # (num - 1) x 1 s
    assert two.record_and_get_throttle_time_ms("u", "b", 0) == 0  # 140 B/s of 1000: within; 1340 B/s is not
    one.record_no_throttle("u", "a", 12_000)
    delta = decode(encode(one.tap.take("w", "3")))
    two.record_remote_rows(*zip(*delta.produce), clock.now_ms())
    assert (
        two.record_and_get_throttle_time_ms("u", "b", 1) > 0 and two.record_and_get_throttle_time_ms("u", "c", 1) == 0
    )


def test_a_members_next_record_finds_the_groups_sensor_without_resolving_until_the_table_changes():
    clock = ManualClock(0)
    t = table([({"client-id": DEFAULT}, {P: 1000})], quota_group("pair", {P: 1000}, client_ids=["a", "b"]))
    m = ClientQuotaManager(t, P, clock, QuotaWindow(11, 1))
    resolved = []
    original = m.keeper.resolve
    m.keeper.resolve = lambda user, client_id: resolved.append(client_id) or original(user, client_id)
    for client_id in ("a", "b", "a", "b", "a", "c", "c"):
        m.record_and_get_throttle_time_ms("u", client_id, 10)
    assert resolved == ["a", "b", "c"]  # once each: then found by its names (c by its own sensor's)
    entity = QuotaEntity(None, "b")
    m.update_quotas(m.quotas.with_changes({entity: QuotaEntry(entity, {P: 5})}))  # b leaves the group's budget
    m.record_and_get_throttle_time_ms("u", "b", 10)
    assert m.stats_for("u", "b").limit == 5 and m.stats_for("u", "a").limit == 1000
    clock.advance(2 * 3_600_000)  # the group's sensor expires: a member is not sent to the dropped one
    m.keeper.expire(clock.now_ms())
    m.record_and_get_throttle_time_ms("u", "a", 10)
    assert m.stats_for("u", "a").value_total == 10


def test_a_members_next_produce_finds_its_groups_producer_id_state_without_resolving():
    t = table([({"user": DEFAULT}, {PRODUCER_IDS_RATE: 100})], quota_group("etl", {PRODUCER_IDS_RATE: 50}, users=["a"]))
    pids = ProducerIdQuotaManager(t, window_num=2, window_size_s=10, enforcement="throttle")
    resolved = []

    class Counting:
        def __getattr__(self, name):
            return getattr(t, name)

        def resolve(self, key, user, client_id):
            resolved.append(user)
            return t.resolve(key, user, client_id)

    pids._quotas = Counting()
    for pid in range(5):
        pids.record_and_decide("a", pid, 0)
        pids.record_and_decide("c", 100 + pid, 0)
    assert resolved == ["a", "c"]
    assert pids.counted_in("a").user == "\x00etl" and pids.counted_in("c").user == "c"


def test_a_shadow_group_decides_its_throttle_and_applies_none():
    clock = ManualClock(0)
    shadowed = quota_group("trial", {P: 1000}, client_ids=["a", "b"], shadow=True)
    m = ClientQuotaManager(table([], shadowed), P, clock, QuotaWindow(11, 1))
    m.record_and_decide("u", "a", 50_000)
    decision = m.record_and_decide("u", "b", 1)
    assert decision != FORWARD and decision.shadow and not is_applied(decision)
