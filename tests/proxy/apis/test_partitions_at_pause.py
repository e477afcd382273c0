"""No partition added at PAUSE (proxy.apis.partitions_at_pause): CreateTopics and CreatePartitions refused whole
(THROTTLING_QUOTA_EXCEEDED for KIP-599's strict versions, POLICY_VIOLATION before), with the pause as throttle and
counted; validate_only, the proxy's own internal topics, an open volume and shadow mode go on; a Metadata's
allow_auto_topic_creation cleared. Pure: bytes in, values out, a fake clock."""

from __future__ import annotations

import pytest

from config.loader import parse_config
from proxy.apis import AnswerLocally, ConnectionScope, ForwardRequest, Session, plan_request
from proxy.apis.internal_topics import InternalTopicGuard
from proxy.cluster.topics import Topics
from proxy.codec.apis import CREATE_PARTITIONS, CREATE_TOPICS, METADATA, response_header_version
from proxy.codec.error_codes import POLICY_VIOLATION, THROTTLING_QUOTA_EXCEEDED
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, frame, parse_request_header
from proxy.codec.messages import decode_request, decode_response, encode_request, new_request
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock

TENANT = Session("L", "10.0.0.9")
DELAY = 1000  # volume_usage.pause_delay_ms' default
USAGE_TOPIC = "__kafka_quota_proxy_volume_usage"


def scope_for(*, paused: bool = True, shadow: bool = False, mutation_rate: int | None = None) -> ConnectionScope:
    raw: dict = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}
    if paused:
        raw["volume_usage"] = {"missing_data_action": "PAUSE", "topic": USAGE_TOPIC}
    if shadow:
        raw["settings"] = {"quota.mode": "shadow"}
    if mutation_rate is not None:
        raw["quotas"] = [{"entity": {"client-id": "admin"}, "controller_mutation_rate": mutation_rate}]
    quotas = ProxyQuotas(parse_config(raw), ManualClock(1_000_000))
    if paused:
        quotas.volume.brokers({1})  # a broker without a snapshot: the fail-safe PAUSE
    return ConnectionScope(None, Topics(), quotas.home)


def create_topics(version: int, *names: str, validate_only: bool = False):
    topics = [{"name": n, "num_partitions": 300, "replication_factor": 3} for n in names]
    return new_request(CREATE_TOPICS, version, topics=topics, timeout_ms=30_000, validate_only=validate_only)


def create_partitions(version: int, *names: str, validate_only: bool = False):
    topics = [{"name": n, "count": 600, "assignments": None} for n in names]
    return new_request(CREATE_PARTITIONS, version, topics=topics, timeout_ms=30_000, validate_only=validate_only)


def decided(scope, api_key, version, msg, session=TENANT):
    buf = frame(encode_request_header(api_key, version, 5, "admin") + encode_request(api_key, version, msg))
    header = parse_request_header(memoryview(buf), 1 << 30)
    plan = plan_request(scope, session, header)
    assert plan.action == BUFFER
    return plan.decide(memoryview(buf)[header.header_length :])


def answer(outcome: AnswerLocally, api_key: int, version: int):
    at = 8 + response_header_version(api_key, version)
    return decode_response(api_key, version, outcome.frame[at:])


def refused(scope) -> dict[str, int]:
    return dict(scope.quotas.volume.refused_writes)


@pytest.mark.parametrize(
    ("api_key", "request_of", "version", "code"),
    [
        (CREATE_TOPICS, create_topics, 7, THROTTLING_QUOTA_EXCEEDED),  # strict since v6 (KIP-599)
        (CREATE_TOPICS, create_topics, 6, THROTTLING_QUOTA_EXCEEDED),
        (CREATE_TOPICS, create_topics, 5, POLICY_VIOLATION),  # librdkafka, older Java clients
        (CREATE_TOPICS, create_topics, 0, POLICY_VIOLATION),
        (CREATE_PARTITIONS, create_partitions, 3, THROTTLING_QUOTA_EXCEEDED),  # strict since v3
        (CREATE_PARTITIONS, create_partitions, 1, POLICY_VIOLATION),
    ],
)
def test_at_pause_no_partition_is_added_and_the_refusal_is_throttled_and_counted(api_key, request_of, version, code):
    """Each topic of the request gets the code, the pause as throttle_time_ms and a mute, and nothing reaches the
    controller; a mutation quota the client has is not charged for what was never asked of the controller."""
    scope = scope_for(mutation_rate=10)
    outcome = decided(scope, api_key, version, request_of(version, "orders", "payments"))
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, api_key, version)
    results = response.topics if api_key == CREATE_TOPICS else response.results
    assert [(r.name, r.error_code) for r in results] == [("orders", code), ("payments", code)]
    if version >= 1:
        assert all("hard limit" in r.error_message for r in results)
    assert outcome.throttle.throttle_time_ms == outcome.throttle.mute_ms == DELAY
    assert outcome.usage.partition_mutations == 0
    assert refused(scope) == {"CreateTopics" if api_key == CREATE_TOPICS else "CreatePartitions": 1}


def test_validate_only_an_open_volume_and_shadow_mode_go_on():
    """validate_only writes nothing (and the mutation quota counts it as nothing); an open volume and shadow mode
    refuse nothing, and count nothing."""
    for api_key, request_of, version in ((CREATE_TOPICS, create_topics, 7), (CREATE_PARTITIONS, create_partitions, 3)):
        scope = scope_for(mutation_rate=10)
        assert decided(scope, api_key, version, request_of(version, "orders", validate_only=True)) == ForwardRequest()
        assert refused(scope) == {}
        shadow = scope_for(shadow=True)
        assert plan_request_is_forwarded(shadow, api_key, version, request_of(version, "orders"))
        assert refused(shadow) == {}
        assert plan_request_is_forwarded(scope_for(paused=False), api_key, version, request_of(version, "orders"))


def plan_request_is_forwarded(scope, api_key, version, msg) -> bool:
    buf = frame(encode_request_header(api_key, version, 5, "admin") + encode_request(api_key, version, msg))
    header = parse_request_header(memoryview(buf), 1 << 30)
    plan = plan_request(scope, TENANT, header)
    return plan.action != BUFFER or plan.decide(memoryview(buf)[header.header_length :]) == ForwardRequest()


def test_the_proxys_own_internal_topics_are_created_at_pause():
    """The volume-usage topic (or the dynamic config's) created by the proxy or an admin goes on, as their writes do:
    a publisher is never paused by what it reports. A tenant's create of one is the internal-topic guard's to refuse."""
    scope = scope_for()
    admin = Session("L", "10.0.0.1", user="admin")
    guarded = ConnectionScope(None, Topics(), scope.quotas, guard=InternalTopicGuard([USAGE_TOPIC], ["User:admin"]))
    assert decided(guarded, CREATE_TOPICS, 7, create_topics(7, USAGE_TOPIC), admin) == ForwardRequest()
    outcome = decided(guarded, CREATE_TOPICS, 7, create_topics(7, USAGE_TOPIC, "orders"), admin)
    assert isinstance(outcome, AnswerLocally)  # a new partition of a tenant's topic all the same


def metadata(version: int, names, allow: bool = True):
    topics = None if names is None else [{"name": n} for n in names]
    return new_request(METADATA, version, topics=topics, allow_auto_topic_creation=allow)


def test_at_pause_a_metadata_request_creates_no_topic():
    """A Metadata naming topics with allow_auto_topic_creation would make a broker with auto.create.topics.enable
    (Kafka's default) create the unknown ones: at PAUSE it goes with the flag cleared, the rest of it as sent; one
    not asking, asking for every topic, or before v4 (no flag) goes as it is, as does every one outside PAUSE."""
    scope = scope_for()
    names = [f"made-up-{i}" for i in range(2_000)]
    for version in (4, 9, 12, 13):
        outcome = decided(scope, METADATA, version, metadata(version, names))
        assert isinstance(outcome, ForwardRequest) and outcome.body is not None
        sent = decode_request(METADATA, version, memoryview(outcome.body))
        assert not sent.allow_auto_topic_creation and [t.name for t in sent.topics] == names
        assert decided(scope, METADATA, version, metadata(version, names, allow=False)) == ForwardRequest()
        assert decided(scope, METADATA, version, metadata(version, None)) == ForwardRequest()
    assert refused(scope) == {}  # a producer asks with the flag for topics that exist too: not a refusal
    assert plan_request_is_forwarded(scope, METADATA, 3, metadata(3, names))  # no flag to clear
    for other in (scope_for(paused=False), scope_for(shadow=True)):
        assert plan_request_is_forwarded(other, METADATA, 12, metadata(12, names))
