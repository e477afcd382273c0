import math

import pytest

from quota import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, QuotaTable, QuotaTags

P = PRODUCER_BYTE_RATE

# The eight levels in Kafka's precedence order, each with a distinct limit, and the tags Kafka gives (alice, etl).
LEVELS = [
    ({"user": "alice", "client-id": "etl"}, 1, ("alice", "etl")),
    ({"user": "alice", "client-id": DEFAULT}, 2, ("alice", "etl")),
    ({"user": "alice"}, 3, ("alice", "")),
    ({"user": DEFAULT, "client-id": "etl"}, 4, ("alice", "etl")),
    ({"user": DEFAULT, "client-id": DEFAULT}, 5, ("alice", "etl")),
    ({"user": DEFAULT}, 6, ("alice", "")),
    ({"client-id": "etl"}, 7, ("", "etl")),
    ({"client-id": DEFAULT}, 8, ("", "etl")),
]


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_most_specific_of_the_eight_levels_wins(first):
    table = QuotaTable.from_values([(entity, {P: limit}) for entity, limit, _ in LEVELS[first:]])
    resolved = table.resolve(P, "alice", "etl")
    entity, limit, tags = LEVELS[first]
    assert resolved.limit == limit
    assert resolved.tags == QuotaTags(*tags)
    assert resolved.entity == QuotaEntity.from_dict(entity)
    assert not resolved.unlimited


def test_nothing_configured_is_unlimited_with_client_id_tags():
    resolved = QuotaTable().resolve(P, "alice", "etl")
    assert resolved.unlimited and math.isinf(resolved.limit)
    assert resolved.tags == QuotaTags("", "etl")


def test_resolution_is_per_quota_key():
    table = QuotaTable.from_values([({"user": "alice"}, {P: 100}), ({"client-id": "etl"}, {CONSUMER_BYTE_RATE: 200})])
    assert table.resolve(P, "alice", "etl").limit == 100
    assert table.resolve(CONSUMER_BYTE_RATE, "alice", "etl").limit == 200
    assert table.resolve(CONSUMER_BYTE_RATE, "alice", "etl").tags == QuotaTags("", "etl")
    assert table.resolve(P, "bob", "etl").unlimited


def test_default_user_quota_applies_to_each_user_separately():
    table = QuotaTable.from_values([({"user": DEFAULT}, {P: 1000})])
    alice, bob = table.resolve(P, "alice", "etl"), table.resolve(P, "bob", "etl")
    assert alice.limit == bob.limit == 1000
    assert alice.tags == QuotaTags("alice", "")
    assert bob.tags == QuotaTags("bob", "")
    # All of alice's clients share her quota.
    assert table.resolve(P, "alice", "web").tags == alice.tags


def test_client_id_only_quota_is_shared_across_users():
    table = QuotaTable.from_values([({"client-id": "etl"}, {P: 10}), ({"client-id": DEFAULT}, {P: 5})])
    assert table.resolve(P, "alice", "etl").tags == table.resolve(P, "bob", "etl").tags == QuotaTags("", "etl")
    other = table.resolve(P, "alice", "web")
    assert (other.limit, other.tags) == (5, QuotaTags("", "web"))
    # KIP-13: clients without a client id share the quota of the empty id.
    assert table.resolve(P, "ANONYMOUS", "").tags == QuotaTags("", "")


def test_user_client_default_is_per_user_and_client():
    table = QuotaTable.from_values([({"user": "alice", "client-id": DEFAULT}, {P: 7})])
    assert table.resolve(P, "alice", "a").tags == QuotaTags("alice", "a")
    assert table.resolve(P, "alice", "b").tags == QuotaTags("alice", "b")
    assert table.resolve(P, "bob", "a").unlimited


def test_a_client_literally_named_default_does_not_match_default_entries():
    table = QuotaTable.from_values([({"client-id": "etl"}, {P: 1})])
    assert table.resolve(P, "alice", DEFAULT).unlimited


def test_none_in_an_entity_dict_means_default():
    assert QuotaEntity.from_dict({"user": None}) == QuotaEntity(user=DEFAULT)
    assert QuotaEntity.from_dict({"user": "a", "client-id": None}).path == "/users/a/clients/<default>"


@pytest.mark.parametrize(
    "values, message",
    [
        ([({"ip": "1.2.3.4"}, {P: 1})], "unknown quota entity type"),
        ([({}, {P: 1})], "needs a user"),
        ([({"user": "a"}, {"producer_bytes_rate": 1})], "unknown quota key"),
        ([({"user": "a"}, {P: -1})], "must be a number >= 0"),
        ([({"user": "a"}, {P: True})], "must be a number >= 0"),
        ([({"user": "a"}, {P: 1}), ({"user": "a"}, {CONSUMER_BYTE_RATE: 1})], "configured more than once"),
    ],
)
def test_bad_values_are_rejected_with_the_entity_path(values, message):
    with pytest.raises(ValueError, match=message):
        QuotaTable.from_values(values)


def test_shadow_flag_is_carried_to_the_resolution():
    table = QuotaTable.from_values([({"user": "alice"}, {P: 1}, True), ({"user": "bob"}, {P: 1})])
    assert table.resolve(P, "alice", "x").shadow
    assert not table.resolve(P, "bob", "x").shadow


class CountingDict(dict):
    lookups = 0

    def get(self, key, default=None):
        CountingDict.lookups += 1
        return super().get(key, default)


def _big_table(n: int) -> QuotaTable:
    values = [({"user": DEFAULT}, {P: 1}), ({"client-id": DEFAULT}, {P: 2})]
    for i in range(n):
        values.append(({"user": f"user{i}", "client-id": f"client{i}"}, {P: 3}))
        values.append(({"user": f"user{i}"}, {P: 4}))
        values.append(({"client-id": f"client{i}"}, {P: 5}))
    return QuotaTable.from_values(values)


def _lookups_for(table: QuotaTable, queries) -> int:
    chunked = table._by_key[P]  # a ChunkedMap: count the lookups in its chunks
    chunked._chunks = [CountingDict(chunk) for chunk in chunked._chunks]
    CountingDict.lookups = 0
    for user, client_id in queries:
        table.resolve(P, user, client_id)
    return CountingDict.lookups


def test_lookup_cost_is_flat_in_the_number_of_entities():
    queries = [("user3", "client3"), ("user3", "other"), ("nobody", "client3"), ("nobody", "nothing")]
    small = _lookups_for(_big_table(10), queries)
    large = _lookups_for(_big_table(20_000), queries)
    assert small == large
    assert large <= 8 * len(queries)


def test_matches_lists_what_resolve_tries_in_its_order_and_precedence_numbers_the_levels():
    from itertools import product

    from quota.primitives.entity import LEVEL_PATHS, precedence

    shapes = [
        {"user": "alice", "client-id": "etl"},
        {"user": "alice", "client-id": DEFAULT},
        {"user": "alice"},
        {"user": DEFAULT, "client-id": "etl"},
        {"user": DEFAULT, "client-id": DEFAULT},
        {"user": DEFAULT},
        {"client-id": "etl"},
        {"client-id": DEFAULT},
    ]
    for level, shape in enumerate(shapes, 1):
        assert precedence(QuotaEntity.from_dict(shape)) == level
        assert LEVEL_PATHS[level - 1] == QuotaEntity.from_dict(shape).path.replace("alice", "<user>").replace(
            "etl", "<client-id>"
        )
    for chosen in product((False, True), repeat=len(shapes)):
        table = QuotaTable.from_values([(s, {"producer_byte_rate": i + 1}) for i, s in enumerate(shapes) if chosen[i]])
        for user, client_id in (("alice", "etl"), ("alice", "other"), ("bob", "etl"), ("bob", "other")):
            found = table.matches("producer_byte_rate", user, client_id)
            assert [precedence(r.entity) for r in found] == sorted(precedence(r.entity) for r in found)
            assert (found[0] if found else None) == (
                None
                if table.resolve("producer_byte_rate", user, client_id).unlimited
                else table.resolve("producer_byte_rate", user, client_id)
            )
