"""The internal topics a Streams topology makes its coordinator create, charged to controller_mutation_rate
(proxy.apis.streams_topics): on bytes, one connection core with this test as the broker, a fake clock. StreamsGroupHeartbeat
frames encoded by the codec from Kafka's definitions; the coordinator's MISSING_INTERNAL_TOPICS answer settles the
charge at the counts created."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from proxy.cluster import creation_claims
from proxy.cluster.creation_claims import CreationClaims
from proxy.codec.apis import METADATA, STREAMS_GROUP_HEARTBEAT
from proxy.codec.enums import MISSING_INTERNAL_TOPICS
from proxy.codec.error_codes import COORDINATOR_NOT_AVAILABLE, NONE, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION
from quota.sharing.first_claims import FirstClaims
from tests.proxy.mutation_wire import WantedCounts, Wire

CHANGELOG, REPARTITION = "app-store-changelog", "app-KSTREAM-REPARTITION-0000000003-repartition"
ASSIGNMENT_DELAYED = 5


def tokens(wire):
    return wire.scope.quotas.mutations.tokens("ANONYMOUS", "admin")


def join(wire, version, corr, topology=True, repartition=6, existing=None):
    """A member joining with the topology of a two-sub-topology application: a store's changelog (no count
    declared: the source topics') and a repartition topic of ``repartition`` partitions between them."""
    subtopologies = [
        {
            "subtopology_id": "0",
            "source_topics": ["orders"],
            "repartition_sink_topics": [REPARTITION],
        },
        {
            "subtopology_id": "1",
            "repartition_source_topics": [{"name": REPARTITION, "partitions": repartition, "topic_configs": []}],
            "state_changelog_topics": [
                {"name": CHANGELOG, "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}
            ],
        },
    ]
    existing = existing or {}
    fields = dict(group_id="app", member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30_000)
    fields["process_id"] = str(uuid.uuid4())
    if topology:
        fields["topology"] = {"epoch": 1, "subtopologies": subtopologies}
    wire.send(STREAMS_GROUP_HEARTBEAT, version, corr, **fields)
    return looked_up(wire, existing)


def looked_up(wire, existing):
    """The broker's requests, the proxy's Metadata lookup of the internal topics it does not know answered first
    (``existing``: name -> partitions of those the broker has; the others UNKNOWN_TOPIC_OR_PARTITION)."""
    requests = wire.broker_requests()
    if not requests or requests[0][0].api_key != METADATA:
        return requests
    ((lookup, asked),) = requests
    assert lookup.correlation_id < 0 and not asked.allow_auto_topic_creation  # the proxy's own, before the request
    topics = [
        {"name": t.name, "error_code": NONE, "partitions": [{"partition_index": i} for i in range(existing[t.name])]}
        if t.name in existing
        else {"name": t.name, "error_code": UNKNOWN_TOPIC_OR_PARTITION, "partitions": []}
        for t in asked.topics
    ]
    wire.answer(lookup, topics=topics)
    return wire.broker_requests()


def answered(wire, header, error_code=NONE, missing=(CHANGELOG, REPARTITION)):
    status = [{"status_code": ASSIGNMENT_DELAYED, "status_detail": "Assignment delayed due to the configured delay."}]
    if missing:
        detail = f"Internal topics are missing: [{', '.join(missing)}]"
        status.append({"status_code": MISSING_INTERNAL_TOPICS, "status_detail": detail})
    wire.answer(header, error_code=error_code, member_id="m", member_epoch=1, heartbeat_interval_ms=5000, status=status)


@pytest.mark.parametrize("version", [0, 1])
def test_a_topologys_missing_internal_topics_are_charged_the_partitions_created_once_for_the_application(version):
    counts = WantedCounts()
    wire = Wire(rate=1, num=100, counts=counts)  # a burst of 100 partitions
    ((forwarded, _),) = join(wire, version, 1)
    assert tokens(wire) == 94  # admitted: the repartition topic's declared 6 taken
    answered(wire, forwarded)
    assert sorted(name for name, _ in counts.wanted) == sorted([CHANGELOG, REPARTITION])
    for name, then in counts.wanted:  # looked up once the answer went out: what the controller created
        then(4 if name == CHANGELOG else 6)
    assert tokens(wire) == 90 and wire.logged(STREAMS_GROUP_HEARTBEAT) == 10
    # the application's second instance joins with the same topology: its topics are known now, nothing charged
    ((forwarded, _),) = join(wire, version, 2)
    answered(wire, forwarded, missing=())
    assert tokens(wire) == 90 and len(counts.wanted) == 2
    ((_, response), (_, second)) = wire.client_responses(STREAMS_GROUP_HEARTBEAT, version)
    assert (response.error_code, response.throttle_time_ms, second.error_code) == (NONE, 0, NONE)


def test_topics_the_coordinator_did_not_ask_for_are_given_back_and_a_count_not_learnt_costs_one_partition():
    counts = WantedCounts()
    wire = Wire(rate=1, num=100, counts=counts)
    ((forwarded, _),) = join(wire, 1, 1)
    answered(wire, forwarded, error_code=NOT_COORDINATOR)  # nothing created: all given back
    assert tokens(wire) == 100 and counts.wanted == []
    ((forwarded, _),) = join(wire, 1, 2)
    answered(wire, forwarded, missing=(CHANGELOG,))  # the repartition topic was there after all
    assert tokens(wire) == 100
    ((name, then),) = counts.wanted
    then(None)  # the controller's creation not seen in three lookups
    assert name == CHANGELOG and tokens(wire) == 99
    ((forwarded, _),) = join(wire, 1, 3, topology=False)  # an ordinary heartbeat: nothing to create
    answered(wire, forwarded, missing=())
    assert tokens(wire) == 99


def test_topics_a_heartbeat_without_a_topology_makes_the_coordinator_create_are_charged_after_the_fact():
    """A member that joined before its source topics existed: the coordinator configures the topology when they
    appear, on the member's next heartbeat (no topology in it), and has the changelog created then (Apache Kafka
    4.x, tests/integration/kafka/test_quotas_mutation.py). Its answer is read: the topics it lists are charged their
    created count after the fact; a word of the status that is no topic is found in no metadata and costs nothing."""
    counts = WantedCounts()
    wire = Wire(rate=1, num=100, counts=counts)
    ((forwarded, _),) = join(wire, 1, 1, topology=False)
    answered(wire, forwarded, missing=(CHANGELOG, "Retrying"))
    assert sorted(name for name, _ in counts.wanted) == sorted([CHANGELOG, "Retrying"]) and tokens(wire) == 100
    for name, then in counts.wanted:
        then(3 if name == CHANGELOG else None)
    assert tokens(wire) == 97 and wire.logged(STREAMS_GROUP_HEARTBEAT) == 3
    ((forwarded, _),) = join(wire, 1, 2, topology=False)  # another member's heartbeat: the changelog is known now
    answered(wire, forwarded, missing=(CHANGELOG,))
    assert len(counts.wanted) == 2 and tokens(wire) == 97


def test_a_topology_over_the_quota_is_refused_and_never_reaches_the_coordinator():
    """Rate 1, burst 10: a made-up application whose repartition topic has 50 partitions is admitted (the bucket
    was not negative) and leaves it 40 in debt; the next application's join is answered COORDINATOR_NOT_AVAILABLE
    with the 40 s the bucket needs, and the broker never sees it."""
    counts = WantedCounts()
    wire = Wire(rate=1, num=10, counts=counts)
    ((forwarded, _),) = join(wire, 1, 1, repartition=50)
    answered(wire, forwarded, missing=(REPARTITION,))
    counts.wanted.pop()[1](50)
    assert tokens(wire) == -40
    wire.scope.topics.deleted(REPARTITION, wire.clock.now_ms())  # a new application id: new topics
    assert join(wire, 1, 2) == []
    (_, first), (_, refused) = wire.client_responses(STREAMS_GROUP_HEARTBEAT, 1)
    assert refused.error_code == COORDINATOR_NOT_AVAILABLE and "controller_mutation_rate" in refused.error_message
    assert refused.throttle_time_ms == 40_000
    assert tokens(wire) == -40


def test_a_topology_whose_topics_another_worker_created_is_looked_up_and_costs_nothing():
    """Each worker (and each sidecar) learns topics on its own: one that has not seen an application's internal
    topics created (another worker's member joined first, or the proxy restarted) asks the broker before charging,
    so the join of an application whose topics exist costs nothing and is admitted even with the client's bucket in
    debt; only what the broker does not have either is charged, as before."""
    counts = WantedCounts()
    wire = Wire(rate=1, num=10, counts=counts)
    wire.scope.quotas.mutations.record("ANONYMOUS", "admin", 50, wire.clock.now_ms())  # 40 in debt
    ((forwarded, _),) = join(wire, 1, 1, existing={CHANGELOG: 4, REPARTITION: 6})
    answered(wire, forwarded, missing=())
    ((_, response),) = wire.client_responses(STREAMS_GROUP_HEARTBEAT, 1)
    assert (response.error_code, response.throttle_time_ms) == (NONE, 0) and tokens(wire) == -40
    assert counts.wanted == [] and wire.logged(STREAMS_GROUP_HEARTBEAT) == 0
    ((forwarded, _),) = join(wire, 1, 2)  # known now: no lookup, nothing charged
    answered(wire, forwarded, missing=())
    assert tokens(wire) == -40
    # one of them missing on the broker too: charged, and over the quota refused as before
    wire.scope.topics.deleted(REPARTITION, wire.clock.now_ms())
    assert join(wire, 1, 3, existing={CHANGELOG: 4}) == []
    (_, refused) = wire.client_responses(STREAMS_GROUP_HEARTBEAT, 1)[-1]
    assert refused.error_code == COORDINATOR_NOT_AVAILABLE and refused.throttle_time_ms == 40_000


def test_two_first_instances_joining_through_two_workers_at_once_are_charged_the_topics_once():
    """``workers: 2``: the application's first two instances join through two workers before either answer; the
    coordinator tells both the topics are missing and each worker learns the counts created. The topics are one:
    the worker whose claim reaches the parent first charges them, the other gives its tokens back. The parent's
    ledger is the real one, its frames delivered by the test in the order the parent reads them."""

    async def run():
        ledger, claims, wires, sent = FirstClaims(), [], [], []
        for worker in range(2):
            gate = CreationClaims()
            gate.attach(lambda payload, worker=worker: sent.append((worker, json.loads(payload))))
            counts = WantedCounts()
            claims.append(gate)
            wires.append((Wire(rate=1, num=100, counts=counts, claims=gate), counts))
        wanted = (CHANGELOG, REPARTITION)
        for wire, _ in wires:  # both joins forwarded before either answer
            ((forwarded, _),) = join(wire, 1, 1)
            answered(wire, forwarded)
        for wire, counts in wires:  # each worker learns the counts created
            for name, then in counts.wanted:
                then(4 if name == CHANGELOG else 6)
            assert tokens(wire) == 94  # nothing settled before the parent's answer: the declared 6 still taken
        assert sorted((w, name) for w, (_, name, _) in sent) == [(w, t) for w in (0, 1) for t in sorted(wanted)]
        assert {ttl for _, (_, _, ttl) in sent} == {wires[0][0].scope.quotas.metadata_max_age_ms}
        for worker, (claim_id, name, ttl_ms) in sorted(sent, key=lambda s: s[0] != 1):  # worker 1's reach it first
            first = ledger.claim(name, wires[worker][0].clock.now_ms(), ttl_ms)
            claims[worker].answered(json.dumps([claim_id, first]).encode())
        assert [tokens(wire) for wire, _ in wires] == [100, 90]  # charged once, by worker 1
        assert wires[1][0].logged(STREAMS_GROUP_HEARTBEAT) == 10 and wires[0][0].logged(STREAMS_GROUP_HEARTBEAT) == 0
        ((forwarded, _),) = join(wires[0][0], 1, 2)  # worker 0 knows the topics now: a third instance costs nothing
        answered(wires[0][0], forwarded, missing=())
        assert tokens(wires[0][0]) == 100 and len(sent) == 4

    asyncio.run(run())


def test_a_claim_the_parent_leaves_unanswered_is_charged_by_the_worker(monkeypatch):
    """The parent slow, or the link lost: the worker charges the topic itself (at worst once per worker, never
    not at all)."""
    monkeypatch.setattr(creation_claims, "CLAIM_TIMEOUT_S", 0.01)

    async def run():
        gate, counts = CreationClaims(), WantedCounts()
        gate.attach(lambda payload: None)
        wire = Wire(rate=1, num=100, counts=counts, claims=gate)
        ((forwarded, _),) = join(wire, 1, 1)
        answered(wire, forwarded)
        for name, then in counts.wanted:
            then(4 if name == CHANGELOG else 6)

        async def timed_out() -> None:
            while gate.timeouts < 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(timed_out(), 30)
        assert tokens(wire) == 90

    asyncio.run(run())


@pytest.mark.parametrize("rate", [1, None])
def test_at_pause_a_topology_needing_new_topics_is_refused_and_one_whose_topics_exist_joins(rate):
    """A volume at its hard limit: no partition is added (proxy.apis.partitions_at_pause), so a join whose topology
    needs internal topics the broker does not have is answered COORDINATOR_NOT_AVAILABLE (the member retries until
    the PAUSE ends) with pause_delay_ms, counted, whether or not a controller_mutation_rate applies, and nothing is
    charged; an instance of an application whose topics exist joins."""
    wire = Wire(rate=rate, num=100, paused=True)
    assert join(wire, 1, 1, existing={CHANGELOG: 4}) == []  # the repartition topic is missing
    ((_, refused),) = wire.client_responses(STREAMS_GROUP_HEARTBEAT, 1)
    assert (refused.error_code, refused.throttle_time_ms) == (COORDINATOR_NOT_AVAILABLE, 1000)
    assert "hard limit" in refused.error_message
    assert wire.scope.quotas.volume.refused_writes == {"StreamsGroupHeartbeat": 1}
    if rate:
        assert tokens(wire) == 100
    wire.clock.advance(1000)  # the refusal's mute
    ((forwarded, _),) = join(wire, 1, 2, existing={REPARTITION: 6})  # the changelog is known since the lookup
    answered(wire, forwarded, missing=())
    ((_, response),) = wire.client_responses(STREAMS_GROUP_HEARTBEAT, 1)
    assert response.error_code == NONE and wire.scope.quotas.volume.refused_writes == {"StreamsGroupHeartbeat": 1}
