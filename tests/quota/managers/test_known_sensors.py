"""A known client's byte-rate record skips resolving (``SensorKeeper.known``) under every quota shape, and a
quota change still applies to its very next request."""

import pytest

from quota import DEFAULT, PRODUCER_BYTE_RATE, ClientQuotaManager, ManualClock, QuotaTable, Throttle
from quota.managers.volume_scaling import ScaledProduceQuotas
from quota.primitives.entity import QuotaEntity, QuotaEntry

P = PRODUCER_BYTE_RATE

SHAPES = {
    "client-id": {"client-id": "etl"},
    "default client-id": {"client-id": DEFAULT},
    "user": {"user": "alice"},
    "default user": {"user": DEFAULT},
    "user and client-id": {"user": "alice", "client-id": "etl"},
    "default pair": {"user": DEFAULT, "client-id": DEFAULT},
}


def counting(m: ClientQuotaManager) -> list:
    """The (user, client-id) of every resolve the manager makes from now on."""
    calls = []
    resolve = m.keeper.resolve  # every resolve, the manager's own and its keeper's, goes through it

    def counted(user, client_id):
        calls.append((user, client_id))
        return resolve(user, client_id)

    m.keeper.resolve = counted
    return calls


@pytest.mark.parametrize("shape", SHAPES)
def test_a_known_client_records_and_reads_its_headroom_without_resolving(shape):
    m = ClientQuotaManager(QuotaTable.from_values([(SHAPES[shape], {P: 10**9})]), P, ManualClock())
    calls = counting(m)
    for t in range(100):
        m.record_and_decide("alice", "etl", 100, t)
        m.remaining_in_quota_window("alice", "etl", t)
        m.max_value_in_quota_window("alice", "etl")
    assert calls == [("alice", "etl")]  # its first record, which made its sensor


def test_under_a_client_id_quota_every_user_of_the_client_id_is_known():
    m = ClientQuotaManager(QuotaTable.from_values([({"client-id": DEFAULT}, {P: 10**9})]), P, ManualClock())
    calls = counting(m)
    m.record_and_decide("alice", "etl", 100, 0)
    for user in ("bob", "", "carol"):
        m.record_and_decide(user, "etl", 100, 1)
    assert calls == [("alice", "etl")]
    assert [s.value_total for s in m.stats(1)] == [400]


def ms(decision) -> int:
    """The throttle of a decision, 0 for FORWARD."""
    return decision.throttle_time_ms if isinstance(decision, Throttle) else 0


def over_quota(m: ClientQuotaManager, user: str, client_id: str, now: int):
    """A record at ``now`` of 4 x what the quota in force lets through over a window."""
    return m.record_and_decide(user, client_id, 4 * m.max_value_in_quota_window(user, client_id), now)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("how", ["changed entity", "new table"])
def test_a_changed_limit_applies_to_the_very_next_request(shape, how):
    entity = QuotaEntity.from_dict(SHAPES[shape])
    table = QuotaTable([QuotaEntry(entity, {P: 10**9})])
    m = ClientQuotaManager(table, P, ManualClock())
    for t in range(10):
        assert ms(m.record_and_decide("alice", "etl", 1000, t)) == 0
    entry = QuotaEntry(entity, {P: 100})
    m.update_quotas(table.with_changes({entity: entry}) if how == "changed entity" else QuotaTable([entry]))
    throttle = m.record_and_decide("alice", "etl", 1000, 10)
    assert ms(throttle) > 0 and not throttle.shadow
    assert m.max_value_in_quota_window("alice", "etl") == 100 * 10  # 11 windows of 1 s: 10 s


@pytest.mark.parametrize("shape", SHAPES)
def test_a_shadow_flag_set_on_the_entry_marks_the_very_next_decision(shape):
    entity = QuotaEntity.from_dict(SHAPES[shape])
    table = QuotaTable([QuotaEntry(entity, {P: 100})])
    m = ClientQuotaManager(table, P, ManualClock())
    assert not over_quota(m, "alice", "etl", 0).shadow
    m.update_quotas(table.with_changes({entity: QuotaEntry(entity, {P: 100}, shadow=True)}))
    assert over_quota(m, "alice", "etl", 1).shadow


def test_a_user_quota_added_over_a_client_id_quota_applies_at_once_and_its_removal_too():
    table = QuotaTable.from_values([({"client-id": DEFAULT}, {P: 10**9})])
    m = ClientQuotaManager(table, P, ManualClock())
    for user in ("alice", "bob"):
        m.record_and_decide(user, "etl", 1000, 0)
    alice = QuotaEntity(user="alice")
    with_alice = table.with_changes({alice: QuotaEntry(alice, {P: 100})})
    m.update_quotas(with_alice)
    assert ms(over_quota(m, "alice", "etl", 1)) > 0
    assert ms(m.record_and_decide("bob", "etl", 1000, 1)) == 0
    m.update_quotas(with_alice.with_changes({alice: None}))
    assert ms(m.record_and_decide("alice", "etl", 10_000, 2)) == 0
    assert m.stats_for("alice", "etl").tags == ("", "etl")


def test_a_client_no_user_entry_covers_is_counted_under_its_client_id_not_under_a_user_sensor():
    # Under user entries alone, a client of user "" with client-id "" that no entry covers is counted under ("", "")
    # unlimited; a client of user "" with another client-id is counted under its own client-id, not there.
    m = ClientQuotaManager(QuotaTable.from_values([({"user": "alice"}, {P: 100})]), P, ManualClock())
    for t in range(3):
        m.record_and_decide("", "", 100, t)
    m.record_and_decide("", "cli", 7, 3)
    assert m.stats_for("", "cli").tags == ("", "cli") and m.stats_for("", "cli").value_total == 7


def test_a_client_counted_in_tags_another_entry_gave_takes_its_own_entrys_limit():
    # /users/<default>/clients/ (an empty client-id named) and /users/<default> both count a client of alice under
    # (alice, ""): the one with client-id "" under the first's limit, any other under the second's.
    m = ClientQuotaManager(
        QuotaTable.from_values([({"user": DEFAULT, "client-id": ""}, {P: 100}), ({"user": DEFAULT}, {P: 10**9})]),
        P,
        ManualClock(),
    )
    for t in range(3):
        assert ms(m.record_and_decide("alice", "etl", 1000, t)) == 0
    assert ms(over_quota(m, "alice", "", 3)) > 0


def test_a_new_volume_factor_applies_to_the_very_next_request():
    table = QuotaTable.from_values([({"client-id": "etl"}, {P: 1000})])
    m = ClientQuotaManager(ScaledProduceQuotas(table, 1.0, 500), P, ManualClock())
    for t in range(10):
        assert ms(m.record_and_decide("alice", "etl", 100, t)) == 0
        assert ms(m.record_and_decide("alice", "web", 10, t)) == 0
    m.update_quotas(ScaledProduceQuotas(table, 0.1, 500))
    assert m.max_value_in_quota_window("alice", "etl") == 100 * 10
    assert m.max_value_in_quota_window("alice", "web") == 50 * 10


class Resolving(ClientQuotaManager):
    """Resolves for every record, as the manager did before any known-client lookup."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.keeper.known = lambda user, client_id: None


@pytest.mark.parametrize("seed", range(40))
def test_decisions_and_stats_are_those_of_a_manager_that_resolves_every_record(seed):
    import random

    rng = random.Random(seed)
    entities = [
        QuotaEntity(u, c)
        for u, c in [
            (None, "etl"),
            (None, DEFAULT),
            (None, ""),
            ("alice", None),
            (DEFAULT, None),
            ("", None),
            ("alice", "etl"),
            (DEFAULT, DEFAULT),
            (DEFAULT, ""),
        ]
    ]
    family = rng.choice([entities[:3], entities[3:6], entities[6:], entities])  # one shape, or all mixed

    def entry(entity):
        return QuotaEntry(entity, {P: rng.choice([0, 100, 1000, 10**6])}, rng.random() < 0.2)

    table = QuotaTable([entry(e) for e in family if rng.random() < 0.6])
    clock = ManualClock()
    a, b = (cls(table, P, clock, inactive_sensor_expiration_ms=20_000) for cls in (Resolving, ClientQuotaManager))
    clients = [(u, c) for u in ("alice", "bob", "") for c in ("etl", "web", "")]
    for step in range(600):
        user, client_id = rng.choice(clients)
        op = rng.random()
        if op < 0.6:
            value = rng.choice([0, 10, 100, 1000])
            assert a.record_and_decide(user, client_id, value) == b.record_and_decide(user, client_id, value)
        elif op < 0.7:
            assert a.remaining_in_quota_window(user, client_id) == b.remaining_in_quota_window(user, client_id)
        elif op < 0.8:
            entity = rng.choice(family if rng.random() < 0.9 else entities)
            table = table.with_changes({entity: None if rng.random() < 0.3 else entry(entity)})
            a.update_quotas(table)
            b.update_quotas(table)
        elif op < 0.82:
            a.smoothing = b.smoothing = not a.smoothing
        assert a.stats() == b.stats(), f"step {step}"
        clock.advance(rng.choice([0, 1, 100, 1000, 7000]))
