"""The sensors one quota keeps (quota.primitives.sensor_keeper), on their own, without a manager: which sensor a client
is counted in, the known-client lookup, overflow past the cap, expiry on the record path, the table's version.
Manual times, no sleeping."""

from hypothesis import given, settings
from hypothesis import strategies as st

from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, QuotaEntry, QuotaTags
from quota.primitives.quota_groups import QuotaGroups, quota_group
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors
from quota.primitives.sensor_keeper import RECORD_EXPIRY_BATCH, SensorKeeper

P = PRODUCER_BYTE_RATE
HOUR_MS = 3_600_000


def keeper(values, cap: int = 1000) -> SensorKeeper:
    return SensorKeeper(QuotaTable.from_values(values), P, QuotaWindow(), ClientSensors, HOUR_MS, cap)


def test_a_client_is_known_by_its_names_once_recorded_and_resolved_again_after_a_change():
    k = keeper([({"user": DEFAULT, "client-id": DEFAULT}, {P: 1000})])
    assert k.known("alice", "etl") is None  # never seen
    made = k.for_record("alice", "etl", 0)
    assert made.tags == QuotaTags("alice", "etl") and made.limit == 1000 and len(k) == 1
    assert k.known("alice", "etl") is made and k.for_record("alice", "etl", 1) is made
    k.update_quotas(QuotaTable.from_values([({"user": DEFAULT, "client-id": DEFAULT}, {P: 500})]), lambda: 2)
    assert k.known("alice", "etl") is None  # its limit changed: resolved once more before it is trusted
    assert made.limit == 500  # applied at once
    assert k.for_record("alice", "etl", 3) is made and k.known("alice", "etl") is made


def test_past_the_cap_a_new_default_entity_evicts_an_unused_one_and_named_ones_are_tracked():
    """Past the cap a new entity gets its own sensor; room is made by evicting one not recorded since it was last
    moved (the front's used ones get a second chance), its debt carried in the sketch; a named entity is always
    tracked, over the cap."""
    k = keeper([({"client-id": DEFAULT}, {P: 1000}), ({"client-id": "etl"}, {P: 50})], cap=3)
    for i in range(3):
        k.for_record("", f"c-{i}", i).record(100, i)
    k.for_record("", "c-0", 5).record(100, 5)  # c-0 used again: it keeps its place
    first = k.for_record("", "new-0", 10)
    assert first.tags == QuotaTags("", "new-0") and k.overflowed == 1
    assert QuotaTags("", "c-0") in k.by_tags and QuotaTags("", "c-1") not in k.by_tags
    assert k.debts.remaining_ms(QuotaTags("", "c-1"), 10) == 100  # its 100 B at 1,000 B/s: paid off in 100 ms
    again = k.for_record("", "c-1", 11)  # back: owing it (more than the burst-less start would)
    assert again.rate.total(11) >= 100
    named = k.for_record("", "etl", 20)  # a quota naming it in full: always its own, beyond the cap
    assert named.tags == QuotaTags("", "etl") and named.limit == 50
    assert len(k) == 4


def test_a_peers_row_marks_its_sensor_under_the_current_version_and_an_unlimited_client_is_not_kept():
    k = keeper([({"user": DEFAULT}, {P: 1000})])
    sensors = k.for_remote("alice", "", 0)  # named by its tags, as a peer's row is
    assert sensors is not None and sensors.resolved_version == k.version == 0
    other = k.for_remote("bob", "etl", 0)  # named otherwise: not marked
    assert other.tags == QuotaTags("bob", "") and other.resolved_version == -1
    k.update_quotas(QuotaTable.from_values([({"user": DEFAULT}, {P: 2000})]), lambda: 1)
    assert k.version == 1 and sensors.resolved_version == -1  # the change reached it
    assert keeper([({"user": "alice"}, {P: 1000})]).for_remote("bob", "", 0) is None


def test_a_record_drops_a_few_idle_sensors_first_and_expire_the_rest():
    k = keeper([({"client-id": DEFAULT}, {P: 1000})])
    for i in range(10):
        k.for_record("", f"c-{i}", i)
    k.for_record("", "late", HOUR_MS + 100)
    assert len(k) == 10 + 1 - RECORD_EXPIRY_BATCH
    assert k.expire(HOUR_MS + 100) == 10 - RECORD_EXPIRY_BATCH and list(k.by_tags) == [QuotaTags("", "late")]


def test_top_sums_the_rest_and_snapshot_lists_every_sensor():
    k = keeper([({"client-id": DEFAULT}, {P: 10**9})])
    for i in range(5):
        k.for_record("", f"c-{i}", 0).record(100 * (i + 1), 0)
    top, other = k.top(3, 0)
    assert [s.tags.client_id for s in top] == ["c-4", "c-3"] and other.value_total == 100 + 200 + 300
    assert len(k.snapshot()) == 5


# -- each keeper's known (the one for its table's shape) finds what the general SensorKeeper.known finds ------------

_SHAPES = [
    [({"user": DEFAULT, "client-id": DEFAULT}, {P: 1000})],  # by names
    [({"user": "alice", "client-id": "etl"}, {P: 1000}), ({"user": DEFAULT}, {P: 500})],  # by names, mixed
    [({"client-id": DEFAULT}, {P: 1000}), ({"client-id": "etl"}, {P: 50})],  # by client-id
    [({"user": DEFAULT}, {P: 1000}), ({"user": "bob"}, {P: 70})],  # by user
    [({"user": "alice"}, {P: 1000}), ({"client-id": "etl"}, {P: 50})],  # by nothing (users and client-ids)
    [({"user": "carol"}, {P: 1000})],  # by user: most clients under no quota
]
_NAMES = [(u, c) for u in ("alice", "bob", "carol", "") for c in ("etl", "web", "")]


def _groups_table(shape: int) -> QuotaTable:
    """Shape ``shape`` with a quota group of users besides (its members found through the keeper's members)."""
    entries = [QuotaEntry(QuotaEntity.from_dict(entity), quotas) for entity, quotas in _SHAPES[shape]]
    return QuotaTable(entries, QuotaGroups([quota_group("team", {P: 300}, users=["bob", "dave"])]))


@given(
    shape=st.integers(0, len(_SHAPES) - 1),
    grouped=st.booleans(),
    steps=st.lists(
        st.tuples(st.sampled_from(["record", "update", "expire"]), st.sampled_from(_NAMES + [("dave", "etl")])),
        max_size=40,
    ),
    cap=st.integers(1, 6),
)
@settings(max_examples=300, deadline=None)
def test_each_keepers_known_finds_what_the_general_lookup_finds(shape, grouped, steps, cap):
    table = _groups_table(shape) if grouped else QuotaTable.from_values(_SHAPES[shape])
    k = SensorKeeper(table, P, QuotaWindow(), ClientSensors, HOUR_MS, cap)
    names = _NAMES + [("dave", "etl")]
    for now, (step, (user, client_id)) in enumerate(steps):
        if step == "record":
            k.for_record(user, client_id, now * 1000).record(10, now * 1000)
        elif step == "update":  # another shape's table (and back): the lookup follows the table
            other = (shape + now) % len(_SHAPES)
            k.update_quotas(_groups_table(other) if grouped else QuotaTable.from_values(_SHAPES[other]), lambda: now)
        else:
            k.expire(now * 1000 + HOUR_MS + 1, 1)
        for u, c in names:
            assert k.known(u, c) is SensorKeeper.known(k, u, c), (u, c)
