"""Partition reassignments at PAUSE (proxy.apis.reassignments): a partition whose target adds a replica on a broker
with a volume at its hard limit is answered POLICY_VIOLATION; moves off it, reorderings and cancellations go to the
broker, judged against the current replicas a Metadata lookup of the proxy's own learns; the answers merged. Pure:
real frames in, values out, a fake clock."""

from __future__ import annotations

import pytest

from config.loader import parse_config
from proxy.apis import FORWARD_AS_IS, AnswerLocally, ConnectionScope, ForwardRequest, LookUp, Session, plan_request
from proxy.cluster.topics import Topics
from proxy.codec.apis import ALTER_PARTITION_REASSIGNMENTS, METADATA, OWN_METADATA_VERSION, response_header_version
from proxy.codec.error_codes import CLUSTER_AUTHORIZATION_FAILED, NONE, POLICY_VIOLATION
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, frame, parse_request_header
from proxy.codec.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.managers.volume import Limit, Snapshot, Volume
from quota.primitives.clock import ManualClock

API = ALTER_PARTITION_REASSIGNMENTS
OPERATOR = Session("L", "10.0.0.7")
GB = 1 << 30
NOW = 1_000_000


def scope_for(*full: int, brokers=(1, 2, 3, 4), missing_data_action: str = "OPEN") -> ConnectionScope:
    """Brokers 1-4 with a fresh snapshot each; those in ``full`` with a volume past its hard limit (PAUSE)."""
    raw: dict = {
        "upstream": {"bootstrap_servers": ["b:1"]},
        "listeners": [{"name": "L", "bind": "h:2"}],
        "volume_usage": {"missing_data_action": missing_data_action},
    }
    quotas = ProxyQuotas(parse_config(raw), ManualClock(NOW))
    volume = quotas.volume
    volume.brokers({1, 2, 3, 4})
    for broker in brokers:
        used = 99 if broker in full else 10
        volume.accept(
            Snapshot(
                broker,
                NOW,
                Limit("ConsumedSpace", 80 * GB),
                Limit("ConsumedSpace", 95 * GB),
                (
                    Volume("/var/lib/kafka/data-0", 100 * GB, 10 * GB),
                    Volume("/var/lib/kafka/data-1", 100 * GB, used * GB),
                ),
            )
        )
    return ConnectionScope(None, Topics(), quotas.home)


def reassign(version: int, **partitions: dict[int, list[int] | None]):
    topics = [
        {"name": name, "partitions": [{"partition_index": i, "replicas": r} for i, r in targets.items()]}
        for name, targets in partitions.items()
    ]
    return new_request(API, version, topics=topics, timeout_ms=60_000)


def decided(scope, version, msg):
    buf = frame(encode_request_header(API, version, 9, "reassign-cli") + encode_request(API, version, msg))
    header = parse_request_header(memoryview(buf), 1 << 30)
    plan = plan_request(scope, OPERATOR, header)
    assert plan.action == BUFFER
    return plan.decide(memoryview(buf)[header.header_length :])


def metadata_answer(**replicas: dict[int, list[int]]) -> memoryview:
    """The broker's Metadata v10 answer: each topic's partitions with their replicas (a topic absent: unknown)."""
    topics = [
        {
            "name": name,
            "error_code": NONE,
            "partitions": [
                {"partition_index": i, "leader_id": r[0], "replica_nodes": r, "isr_nodes": r} for i, r in parts.items()
            ],
        }
        for name, parts in replicas.items()
    ]
    msg = new_response(METADATA, OWN_METADATA_VERSION, brokers=[], topics=topics)
    return memoryview(encode_response(METADATA, OWN_METADATA_VERSION, msg))


def probe_answer(outcome, version: int, error_code: int = NONE, message: str | None = None):
    """The request with no partitions the proxy asks first (may this principal reassign?), answered by the broker."""
    assert isinstance(outcome, LookUp) and outcome.api_key == API and outcome.api_version == version
    probe = decode_request(API, version, outcome.body)
    assert probe.topics == [] and probe.timeout_ms == 60_000 and outcome.client_id == "reassign-cli"
    answer = new_response(API, version, error_code=error_code, error_message=message, responses=[])
    return outcome.then(memoryview(encode_response(API, version, answer)))


def looked_up(outcome, **replicas):
    """The lookup the proxy asked once the principal may reassign (its topics), then what it decides on the broker's
    answer."""
    outcome = probe_answer(outcome, outcome.api_version)
    assert isinstance(outcome, LookUp) and outcome.api_key == METADATA
    asked = decode_request(METADATA, outcome.api_version, outcome.body)
    assert asked.allow_auto_topic_creation is False
    return {t.name for t in asked.topics}, outcome.then(metadata_answer(**replicas))


def partitions(msg) -> dict[tuple[str, int], object]:
    return {(t.name, p.partition_index): p for t in getattr(msg, "topics", None) or msg.responses for p in t.partitions}


def local_answer(outcome: AnswerLocally, version: int):
    return decode_response(API, version, outcome.frame[8 + response_header_version(API, version) :])


@pytest.mark.parametrize("version", [0, 1])
def test_only_the_partitions_adding_a_replica_on_a_full_broker_are_refused_the_rest_forwarded_and_merged(version):
    """Broker 3 is full. orders-0 moves onto it: refused. orders-1 moves off it, orders-2 reorders its replicas
    (3 stays), orders-3 is cancelled, clicks-0 moves between brokers with room: all forwarded."""
    scope = scope_for(3)
    msg = reassign(version, orders={0: [1, 3], 1: [1, 2], 2: [2, 3, 1], 3: None}, clicks={0: [2, 4]})
    asked, outcome = looked_up(
        decided(scope, version, msg), orders={0: [1, 2], 1: [3, 1], 2: [1, 2, 3], 3: [1, 2]}, clicks={0: [1, 2]}
    )
    assert asked == {"orders"}  # only topics whose targets name a full broker
    assert isinstance(outcome, ForwardRequest)
    forwarded = partitions(decode_request(API, version, outcome.body))
    assert set(forwarded) == {("orders", 1), ("orders", 2), ("orders", 3), ("clicks", 0)}
    assert forwarded[("orders", 3)].replicas is None  # the cancellation goes as it came
    assert dict(scope.quotas.volume.refused_writes) == {"AlterPartitionReassignments": 1}

    broker = new_response(
        API,
        version,
        error_code=NONE,
        responses=[
            {"name": t, "partitions": [{"partition_index": i, "error_code": NONE} for i in ix]}
            for t, ix in (("orders", (1, 2, 3)), ("clicks", (0,)))
        ],
    )
    merged = partitions(
        decode_response(API, version, outcome.leg.rewrite(memoryview(encode_response(API, version, broker))))
    )
    assert {k: p.error_code for k, p in merged.items()} == {
        ("orders", 0): POLICY_VIOLATION,
        ("orders", 1): NONE,
        ("orders", 2): NONE,
        ("orders", 3): NONE,
        ("clicks", 0): NONE,
    }
    assert "broker 3" in merged[("orders", 0)].error_message


def test_a_request_refused_whole_never_reaches_the_broker():
    scope = scope_for(3, 4)
    msg = reassign(1, orders={0: [3, 4]})
    _, outcome = looked_up(decided(scope, 1, msg), orders={0: [1, 2]})
    assert isinstance(outcome, AnswerLocally)
    answer = local_answer(outcome, 1)
    assert answer.error_code == NONE  # a top-level error would hide which partitions were refused
    (refused,) = partitions(answer).values()
    assert refused.error_code == POLICY_VIOLATION
    assert "brokers 3, 4 each have a volume" in refused.error_message and "hard limit" in refused.error_message


def test_a_broker_top_level_error_stays_as_the_broker_sent_it():
    """Not authorized (or any top-level error): the client fails every partition with it, ours included."""
    scope = scope_for(3)
    _, outcome = looked_up(decided(scope, 0, reassign(0, t={0: [3], 1: [1]})), t={0: [1], 1: [2]})
    broker = new_response(API, 0, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="no", responses=[])
    merged = decode_response(API, 0, outcome.leg.rewrite(memoryview(encode_response(API, 0, broker))))
    assert merged.error_code == CLUSTER_AUTHORIZATION_FAILED and merged.responses == []


@pytest.mark.parametrize("version", [0, 1])
def test_a_principal_that_may_not_reassign_gets_the_brokers_refusal_and_learns_nothing_of_the_volumes(version):
    """Kafka answers CLUSTER_AUTHORIZATION_FAILED to a principal without ALTER on the cluster; the proxy's refusal
    (POLICY_VIOLATION, naming the full broker) would tell it which brokers are full. The broker decides first."""
    scope = scope_for(3)
    msg = reassign(version, orders={0: [1, 3], 1: [1, 2]})
    denied = "Cluster authorization failed."
    outcome = probe_answer(decided(scope, version, msg), version, CLUSTER_AUTHORIZATION_FAILED, denied)
    assert isinstance(outcome, AnswerLocally)  # no Metadata lookup, nothing forwarded
    answer = local_answer(outcome, version)
    assert (answer.error_code, answer.error_message) == (CLUSTER_AUTHORIZATION_FAILED, denied)
    assert {k: p.error_code for k, p in partitions(answer).items()} == {
        ("orders", 0): CLUSTER_AUTHORIZATION_FAILED,
        ("orders", 1): CLUSTER_AUTHORIZATION_FAILED,
    }
    assert all("volume" not in (p.error_message or "") for p in partitions(answer).values())
    assert dict(scope.quotas.volume.refused_writes) == {}


def test_no_target_naming_a_full_broker_goes_on_without_a_lookup():
    assert decided(scope_for(3), 1, reassign(1, t={0: [1, 2], 1: None})) is FORWARD_AS_IS


def test_a_partition_the_broker_does_not_describe_is_judged_with_no_replicas():
    """Unknown topic, or one this principal may not describe: a full broker in its target is refused, the disk
    first."""
    _, outcome = looked_up(decided(scope_for(3), 1, reassign(1, hidden={0: [3, 1]})))
    assert isinstance(outcome, AnswerLocally)
    assert partitions(local_answer(outcome, 1))[("hidden", 0)].error_code == POLICY_VIOLATION


def test_a_broker_without_fresh_data_counts_as_full_when_missing_data_pauses():
    """Broker 4 never reported: the state is PAUSE for it, and it may be full."""
    scope = scope_for(brokers=(1, 2, 3), missing_data_action="PAUSE")
    assert scope.quotas.volume.paused
    _, outcome = looked_up(decided(scope, 1, reassign(1, t={0: [1, 4], 1: [2, 3]})), t={0: [1, 2], 1: [1, 2]})
    assert set(partitions(decode_request(API, 1, outcome.body))) == {("t", 1)}


def test_an_open_volume_leaves_reassignments_alone():
    scope = scope_for()
    buf = frame(encode_request_header(API, 1, 9, "c") + encode_request(API, 1, reassign(1, t={0: [3]})))
    plan = plan_request(scope, OPERATOR, parse_request_header(memoryview(buf), 1 << 30))
    assert plan.action != BUFFER
