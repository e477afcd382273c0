"""KIP-599 charges what the broker did (issue 23 items 2 and 6), on bytes: one connection core, this test as a
scripted broker (:class:`tests.proxy.connection.test_mutation_requests.Wire`).

The proxy admits against the bucket before the broker has answered; the broker's answer then says what was done:
topics it reports with an error are given back, the throttle the response carries (and the mute) is what is left
once the tokens given back and the time spent at the broker are taken off, and a CreateTopics of
``num_partitions: -1`` is charged the count the broker reports (v5+) or the default learnt before.
"""

from __future__ import annotations

import uuid

from proxy.codec.apis import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, METADATA
from proxy.codec.messages import new_response
from tests.proxy.mutation_wire import THROTTLED, WantedCounts, Wire

TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100


def create(name, partitions):
    return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}


def tokens(wire):
    return wire.scope.quotas.mutations.tokens("ANONYMOUS", "admin")


def ask(wire, version, corr, *topics, validate_only=False):
    wire.send(CREATE_TOPICS, version, corr, topics=list(topics), timeout_ms=1000, validate_only=validate_only)
    return wire.broker_requests()


def test_create_if_absent_repeated_costs_nothing_and_a_real_create_then_passes():
    """The issue's scenario: rate 2/s, 10 x 1 s windows (burst 20). One 4-partition create (16 left), then twelve
    creates of the same topic, each answered TOPIC_ALREADY_EXISTS: every one reaches the broker (the bucket never
    goes below 16), and the next real create is forwarded. Before, the sixth was refused with 89."""
    wire = Wire(rate=2, num=10)
    ((forwarded, _),) = ask(wire, 7, 1, create("t", 4))
    wire.answer(forwarded, topics=[{"name": "t", "error_code": 0, "num_partitions": 4}])
    assert tokens(wire) == 16
    for corr in range(2, 14):
        ((forwarded, _),) = ask(wire, 7, corr, create("t", 4))
        wire.answer(
            forwarded,
            topics=[
                {
                    "name": "t",
                    "error_code": TOPIC_ALREADY_EXISTS,
                    "error_message": "Topic 't' already exists.",
                    "num_partitions": -1,
                }
            ],
        )
        assert tokens(wire) == 16
    ((forwarded, body),) = ask(wire, 7, 14, create("u", 4))
    assert [t.name for t in body.topics] == ["u"]
    wire.answer(forwarded, topics=[{"name": "u", "error_code": 0, "num_partitions": 4}])
    responses = wire.client_responses(CREATE_TOPICS, 7)
    assert [r.topics[0].error_code for _, r in responses] == [0] + [TOPIC_ALREADY_EXISTS] * 12 + [0]
    assert all(r.throttle_time_ms == 0 for _, r in responses)
    assert tokens(wire) == 12


def test_strict_partial_admission_whose_admitted_topics_all_failed_reports_no_throttle_and_does_not_mute():
    """Burst 10: x (10) leaves 0, y (10) leaves -10, z is refused with 89 and a 10 s throttle decided. The broker
    refuses x and y (already there): 20 tokens back (10 left), so the response says 0 ms and the next request is
    read at once."""
    wire = Wire(rate=1, num=10)
    ((forwarded, body),) = ask(wire, 7, 1, create("x", 10), create("y", 10), create("z", 10))
    assert [t.name for t in body.topics] == ["x", "y"]
    assert wire.logged() == 20  # the usage log: what admission took
    wire.answer(
        forwarded, topics=[{"name": n, "error_code": TOPIC_ALREADY_EXISTS, "num_partitions": -1} for n in ("x", "y")]
    )
    assert wire.logged() == 0  # and what the broker's answer gave back
    ((corr, response),) = wire.client_responses(CREATE_TOPICS, 7)
    assert [(t.name, t.error_code) for t in response.topics] == [("x", 36), ("y", 36), ("z", THROTTLED)]
    assert response.throttle_time_ms == 0
    assert tokens(wire) == 10
    assert len(ask(wire, 7, 2, create("w", 1))) == 1  # not muted: forwarded at once


def test_strict_partial_admission_throttle_is_what_is_left_after_a_refund_and_the_time_at_the_broker():
    """As above, but the broker creates x and y and answers after 3 s: nothing is given back, and the 10 s throttle
    decided with the request is 7 s when the response goes out (3 s spent at the broker), reported and muted."""
    wire = Wire(rate=1, num=10)
    ((forwarded, _),) = ask(wire, 7, 1, create("x", 10), create("y", 10), create("z", 10))
    wire.clock.advance(3_000)
    wire.answer(
        forwarded,
        topics=[
            {"name": "x", "error_code": 0, "num_partitions": 10},
            {"name": "y", "error_code": 0, "num_partitions": 10},
        ],
    )
    ((corr, response),) = wire.client_responses(CREATE_TOPICS, 7)
    assert response.throttle_time_ms == 7_000  # Kafka's throttleTime: from the charge, not from the response
    assert ask(wire, 7, 2, create("w", 1)) == []  # muted for the 7 s left
    wire.clock.advance(6_999)
    wire.core.step(wire.clock.now_ms() * 1_000_000)
    assert wire.broker_requests() == []
    wire.clock.advance(1)
    wire.core.step(wire.clock.now_ms() * 1_000_000)
    assert len(wire.broker_requests()) == 1  # 7 s after the response went out, not 10


def test_strict_partial_admission_with_one_refused_by_the_broker_is_throttled_for_what_is_left():
    wire = Wire(rate=1, num=10)
    ((forwarded, _),) = ask(wire, 7, 1, create("x", 10), create("y", 4), create("z", 10))  # 0, then -4: z refused
    wire.answer(
        forwarded,
        topics=[
            {"name": "x", "error_code": 0, "num_partitions": 10},
            {"name": "y", "error_code": 38, "num_partitions": -1},
        ],
    )  # INVALID_REPLICATION_FACTOR
    ((corr, response),) = wire.client_responses(CREATE_TOPICS, 7)
    assert response.throttle_time_ms == 0 and tokens(wire) == 0  # 4 s decided, 4 tokens back


def test_permissive_create_throttle_is_recomputed_after_the_broker_refused_some():
    """v4 (permissive): 6 x 100 on a burst of 500 leaves -100 (20 s decided); the broker refuses p5: 100 back, the
    response carries no throttle. Before, 20 s."""
    wire = Wire(rate=5, num=100)
    ((forwarded, _),) = ask(wire, 4, 3, *[create(f"p{i}", 100) for i in range(6)])
    wire.answer(
        forwarded, topics=[{"name": f"p{i}", "error_code": TOPIC_ALREADY_EXISTS if i == 5 else 0} for i in range(6)]
    )
    ((corr, response),) = wire.client_responses(CREATE_TOPICS, 4)
    assert response.throttle_time_ms == 0 and tokens(wire) == 0


def test_validate_only_still_costs_nothing():
    wire = Wire(rate=1, num=1)
    ((forwarded, _),) = ask(wire, 7, 1, create("v", 1000), validate_only=True)
    wire.answer(forwarded, topics=[{"name": "v", "error_code": 0, "num_partitions": 1000}])
    assert tokens(wire) == 1


def test_num_partitions_minus_one_is_charged_the_count_the_broker_reports_then_the_learnt_default():
    """v5+: a -1 create before the default is known takes nothing at admission and the reported count after; the
    next -1 create is charged the learnt default at admission, corrected to what the broker reports."""
    wire = Wire(rate=1, num=100)
    ((forwarded, _),) = ask(wire, 5, 1, create("a", -1))
    assert tokens(wire) == 100  # not known yet: admitted, nothing taken
    wire.answer(forwarded, topics=[{"name": "a", "error_code": 0, "num_partitions": 3, "replication_factor": 1}])
    assert tokens(wire) == 97 and wire.scope.topics.default_partitions == 3
    ((forwarded, _),) = ask(wire, 7, 2, create("b", -1))
    assert tokens(wire) == 94  # the learnt default, at admission
    wire.answer(forwarded, topics=[{"name": "b", "error_code": 0, "num_partitions": 5, "replication_factor": 1}])
    assert tokens(wire) == 92  # the broker created 5 (its default changed): charged 5 in all
    ((forwarded, _),) = ask(wire, 7, 3, create("c", -1))
    wire.answer(forwarded, topics=[{"name": "c", "error_code": TOPIC_ALREADY_EXISTS, "num_partitions": -1}])
    assert tokens(wire) == 92  # refused: the default taken is given back


def test_num_partitions_minus_one_on_v4_is_charged_the_learnt_default():
    wire = Wire(rate=1, num=100)
    wire.scope.topics.created("seen", 6, wire.clock.now_ms(), default=True)
    ((forwarded, _),) = ask(wire, 4, 1, create("a", -1))
    wire.answer(forwarded, topics=[{"name": "a", "error_code": 0}])
    assert tokens(wire) == 94


def test_delete_topics_refused_by_the_broker_is_given_back_by_name_and_by_id():
    wire = Wire(rate=1, num=100)
    gone = uuid.uuid4()
    for name in ("a", "b"):
        wire.scope.topics.created(name, 10, wire.clock.now_ms())
    wire.send(DELETE_TOPICS, 5, 1, topic_names=["a", "b"], timeout_ms=1000)
    ((forwarded, _),) = wire.broker_requests()
    wire.answer(
        forwarded, responses=[{"name": "a", "error_code": 0}, {"name": "b", "error_code": UNKNOWN_TOPIC_OR_PARTITION}]
    )
    assert tokens(wire) == 90
    wire.scope.topics.learn_from_metadata(
        new_response(
            METADATA,
            12,
            topics=[{"name": "c", "topic_id": gone, "partitions": [{"partition_index": i} for i in range(7)]}],
        ),
        wire.clock.now_ms(),
    )
    wire.send(DELETE_TOPICS, 6, 2, topics=[{"name": None, "topic_id": gone}], timeout_ms=1000)
    ((forwarded, _),) = wire.broker_requests()
    assert tokens(wire) == 83
    wire.answer(forwarded, responses=[{"name": None, "topic_id": gone, "error_code": UNKNOWN_TOPIC_ID}])
    assert tokens(wire) == 90


def test_create_partitions_refused_by_the_broker_is_given_back():
    wire = Wire(rate=1, num=100)
    wire.scope.topics.created("a", 2, wire.clock.now_ms())
    wire.send(
        CREATE_PARTITIONS,
        3,
        1,
        topics=[{"name": "a", "count": 12, "assignments": None}],
        timeout_ms=1000,
        validate_only=False,
    )
    ((forwarded, _),) = wire.broker_requests()
    assert tokens(wire) == 90
    wire.answer(forwarded, results=[{"name": "a", "error_code": INVALID_PARTITIONS}])
    assert tokens(wire) == 100
    assert wire.scope.topics.partitions("a", wire.clock.now_ms(), 10**9) == 2  # not learnt from a failure


def test_num_partitions_minus_one_on_v4_before_any_default_is_charged_the_count_looked_up_after_the_answer():
    """A v4 answer carries no count: each topic it reports created with -1 is looked up (not the one it refused), and
    charged the count the lookup finds; that count is the learnt default the next v4 -1 create is charged at
    admission, corrected again by its own lookup. Before, the first create was never charged."""
    counts = WantedCounts()
    wire = Wire(rate=1, num=100, counts=counts)
    ((forwarded, _),) = ask(wire, 4, 1, create("a", -1), create("gone", -1))
    assert tokens(wire) == 100  # not known: admitted, nothing taken
    wire.answer(
        forwarded, topics=[{"name": "a", "error_code": 0}, {"name": "gone", "error_code": TOPIC_ALREADY_EXISTS}]
    )
    assert [name for name, _ in counts.wanted] == ["a"]
    assert wire.logged() == 0
    counts.wanted.pop()[1](3)  # after the response went out: the usage log counts it too
    assert tokens(wire) == 97 and wire.scope.topics.default_partitions == 3 and wire.logged() == 3
    ((forwarded, _),) = ask(wire, 4, 2, create("b", -1))
    assert tokens(wire) == 94 and wire.logged() == 6  # the learnt default, at admission
    wire.answer(forwarded, topics=[{"name": "b", "error_code": 0}])
    counts.wanted.pop()[1](5)  # the broker's default changed: 5 created, 5 charged in all
    assert tokens(wire) == 92 and wire.scope.topics.default_partitions == 5 and wire.logged() == 8


def test_num_partitions_minus_one_on_v4_whose_count_cannot_be_learnt_is_charged_the_fallback():
    """No count learnt: 1 partition (Kafka's num.partitions default) when no default was known, else the learnt
    default taken at admission stands; never nothing."""
    counts = WantedCounts()
    wire = Wire(rate=1, num=100, counts=counts)
    ((forwarded, _),) = ask(wire, 4, 1, create("a", -1))
    wire.answer(forwarded, topics=[{"name": "a", "error_code": 0}])
    counts.wanted.pop()[1](None)
    assert tokens(wire) == 99
    wire.scope.topics.created("seen", 6, wire.clock.now_ms(), default=True)
    ((forwarded, _),) = ask(wire, 4, 2, create("b", -1))
    wire.answer(forwarded, topics=[{"name": "b", "error_code": 0}])
    counts.wanted.pop()[1](None)
    assert tokens(wire) == 93


def test_num_partitions_minus_one_on_v4_without_lookups_is_charged_the_fallback_at_once():
    """A scope built without the proxy's own traffic (NO_LOOKUPS) hands None at once: the fallback, not nothing."""
    wire = Wire(rate=1, num=100)
    ((forwarded, _),) = ask(wire, 4, 1, create("a", -1))
    wire.answer(forwarded, topics=[{"name": "a", "error_code": 0}])
    assert tokens(wire) == 99


def throttle_counters(wire):
    """(throttle time in ms, throttled requests) of the entity: what controller_mutation_throttle_time_seconds_total
    (in seconds) and controller_mutation_throttled_requests_total export."""
    ((stats, _),) = wire.scope.quotas.mutations.buckets(wire.clock.now_ms())
    return stats.throttle_time_ms_total, stats.throttled_count


def test_throttle_counters_count_what_the_client_was_told_after_the_broker_settled_the_charge():
    """Decided 10 s at admission; the broker answered after 3 s: the response says 7 s, and the counters say 7 s.
    Then a request whose admitted topics all failed: 10 s decided, 0 told: no time counted, but the request is (its
    third topic was refused with 89). Then one refused whole by the proxy (nothing to settle): counted as told.
    Before, every throttle decided at admission was counted."""
    wire = Wire(rate=1, num=10)
    ((forwarded, _),) = ask(wire, 7, 1, create("x", 10), create("y", 10), create("z", 10))
    wire.clock.advance(3_000)
    wire.answer(forwarded, topics=[{"name": n, "error_code": 0, "num_partitions": 10} for n in ("x", "y")])
    ((_, told),) = wire.client_responses(CREATE_TOPICS, 7)
    assert told.throttle_time_ms == 7_000 and throttle_counters(wire) == (7_000, 1)
    wire.clock.advance(100_000)  # the mute is over and the bucket full again
    ((forwarded, _),) = ask(wire, 7, 2, create("a", 10), create("b", 10), create("c", 10))
    wire.answer(
        forwarded, topics=[{"name": n, "error_code": TOPIC_ALREADY_EXISTS, "num_partitions": -1} for n in ("a", "b")]
    )
    ((_, told),) = wire.client_responses(CREATE_TOPICS, 7)
    assert told.throttle_time_ms == 0 and throttle_counters(wire) == (7_000, 2)
    ((forwarded, _),) = ask(wire, 7, 3, create("d", 15))  # 10 -> -5
    wire.answer(forwarded, topics=[{"name": "d", "error_code": 0, "num_partitions": 15}])
    ((_, told),) = wire.client_responses(CREATE_TOPICS, 7)
    assert told.throttle_time_ms == 0  # the one request that emptied the bucket is not throttled (strict)
    assert ask(wire, 7, 4, create("e", 1)) == []  # refused whole: answered by the proxy
    ((_, told),) = wire.client_responses(CREATE_TOPICS, 7)
    assert told.throttle_time_ms == 5_000 and throttle_counters(wire) == (12_000, 3)


def test_a_request_refused_topics_counts_as_throttled_when_the_broker_took_longer_than_its_throttle():
    """Burst 10: x (10) leaves 0, y (10) leaves -10, z refused with 89 and 10 s decided; the broker (a busy
    controller) answers after 12 s, so the response says 0 ms. The client was still refused z: the request counts
    in controller_mutation_throttled_requests_total, with no time. (A CI run on a saturated machine showed a
    tenant refused topics while the throttled-requests counter stayed at 0.)"""
    wire = Wire(rate=1, num=10)
    ((forwarded, _),) = ask(wire, 7, 1, create("x", 10), create("y", 10), create("z", 10))
    wire.clock.advance(12_000)
    wire.answer(forwarded, topics=[{"name": n, "error_code": 0, "num_partitions": 10} for n in ("x", "y")])
    ((_, told),) = wire.client_responses(CREATE_TOPICS, 7)
    assert [(t.name, t.error_code) for t in told.topics] == [("x", 0), ("y", 0), ("z", THROTTLED)]
    assert told.throttle_time_ms == 0 and throttle_counters(wire) == (0, 1)


def test_permissive_throttle_counters_count_the_throttle_left_after_refunds():
    """v4: 6 x 100 on a burst of 500 decides 20 s; the broker refuses one topic (100 back): the response says 0 and
    nothing is counted."""
    wire = Wire(rate=5, num=100)
    ((forwarded, _),) = ask(wire, 4, 3, *[create(f"p{i}", 100) for i in range(6)])
    wire.answer(
        forwarded, topics=[{"name": f"p{i}", "error_code": TOPIC_ALREADY_EXISTS if i == 5 else 0} for i in range(6)]
    )
    assert throttle_counters(wire) == (0, 0)
