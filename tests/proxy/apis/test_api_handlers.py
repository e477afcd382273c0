"""Per-API handlers on bytes: ApiVersions intersection, local answers in request order, broker ports."""

import pytest

from config.loader import parse_config
from proxy.apis import ConnectionScope, Session, plan_request
from proxy.apis.api_versions import MAX_VERSION, broker_answer, intersect
from proxy.cluster.broker_ports import BrokerPorts
from proxy.cluster.topics import Topics
from proxy.codec.apis import API_VERSIONS, FETCH, METADATA, PRODUCE
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import DROP, STREAM
from proxy.codec.header import RequestHeader
from proxy.codec.messages import DECODED_APIS, decode_response, encode_response, new_response
from proxy.connection.inflight import InFlightQueue
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas


def api_versions_body(version, ranges):
    msg = new_response(
        API_VERSIONS,
        version,
        api_keys=[{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ranges.items()],
    )
    return encode_response(API_VERSIONS, version, msg)


def test_intersection_caps_decoded_apis_and_passes_others():
    produce_max = DECODED_APIS[PRODUCE][1]
    body = api_versions_body(3, {PRODUCE: (0, produce_max + 5), 68: (0, 1), METADATA: (1, 4)})
    out = decode_response(API_VERSIONS, 3, intersect(3, memoryview(body)))
    got = {a.api_key: (a.min_version, a.max_version) for a in out.api_keys}
    assert got == {PRODUCE: (0, produce_max), 68: (0, 1), METADATA: (1, 4)}


def test_api_with_no_common_version_is_withdrawn():
    low, high = DECODED_APIS[FETCH]
    body = api_versions_body(3, {FETCH: (high + 1, high + 3)})
    out = decode_response(API_VERSIONS, 3, intersect(3, memoryview(body)))
    assert out.api_keys == []


def test_error_response_goes_back_untouched():
    body = encode_response(API_VERSIONS, 0, new_response(API_VERSIONS, 0, error_code=35, api_keys=[]))
    assert intersect(3, memoryview(body)) is None


def test_each_distinct_broker_answer_is_decoded_once_for_every_connection():
    """Every client asks ApiVersions first on every connection, and the broker answers the same bytes: the answer is
    decoded, intersected and encoded once (a flood of one-request connections cost ~320 us each in it), each
    connection still gets the intersection and notes the broker's Metadata range; an error notes nothing."""
    produce_max = DECODED_APIS[PRODUCE][1]
    body = api_versions_body(3, {PRODUCE: (0, produce_max + 5), METADATA: (1, 12), 68: (0, 1)})
    scope = sidecar_scope()
    broker_answer.cache_clear()
    sent = []
    for n in range(3):
        session = Session("L", f"10.0.0.{n}")
        plan = plan_request(scope, session, header(API_VERSIONS, 3, n))
        plan.leg.observe(memoryview(body))
        sent.append(plan.leg.rewrite(memoryview(body)))
        assert session.broker_metadata_versions == (1, 12)
    assert sent[0] == sent[1] == sent[2] == intersect(3, memoryview(body))
    assert (broker_answer.cache_info().misses, broker_answer.cache_info().hits) == (1, 5)
    error = encode_response(API_VERSIONS, 3, new_response(API_VERSIONS, 3, error_code=35, api_keys=[]))
    plan = plan_request(scope, session, header(API_VERSIONS, 3, 9))
    plan.leg.observe(memoryview(error))
    assert plan.leg.rewrite(memoryview(error)) is None and session.broker_metadata_versions == (1, 12)


def header(api_key, version, corr, acks=None):
    return RequestHeader(100, api_key, version, corr, "c", 20, acks)


def sidecar_scope(quotas=()):
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": list(quotas),
        }
    )
    return ConnectionScope(None, Topics(), ProxyQuotas(config).home)


SESSION = Session("L", "127.0.0.1")


def test_too_new_api_versions_is_answered_locally_and_dropped():
    plan = plan_request(sidecar_scope(), SESSION, header(API_VERSIONS, MAX_VERSION + 1, 9))
    assert plan.action is DROP
    assert plan.local_response[4:8] == (9).to_bytes(4, "big")


def test_sidecar_mode_streams_produce_and_fetch_untouched():
    scope = sidecar_scope()
    for api_key in (PRODUCE, FETCH):
        plan = plan_request(
            scope, SESSION, header(api_key, DECODED_APIS[api_key][1], 1, acks=1 if api_key == PRODUCE else None)
        )
        assert plan.action is STREAM and plan.leg.rewrite is None


def test_local_answer_waits_for_earlier_requests():
    q = InFlightQueue()
    q.add(header(METADATA, 9, 1), 0)
    q.add_local(header(API_VERSIONS, 9, 2), 0, b"local")
    assert q.pop_ready_local() is None
    assert q.match(1).header.correlation_id == 1
    assert q.pop_ready_local().local_response == b"local"


def test_local_answer_may_pass_silent_acks0_produces():
    q = InFlightQueue()
    q.add(header(PRODUCE, 9, 1, acks=0), 0)
    q.add_local(header(API_VERSIONS, 9, 2), 0, b"local")
    assert q.pop_ready_local().header.correlation_id == 2
    assert q.match(1) is None  # the broker's answer to the acks=0 produce is still recognised and dropped


def test_broker_ports_open_once_and_follow_moves():
    opened = []
    ports = BrokerPorts("L", "proxy.example", 19100, lambda n: opened.append(n) or True)
    assert ports.advertise(3, "b3", 9092) == ("proxy.example", 19103)
    assert ports.advertise(3, "b3", 9092) == ("proxy.example", 19103)
    assert ports.advertise(3, "b3-new", 9092) == ("proxy.example", 19103)
    assert opened == [3]
    assert [str(a) for a in ports.upstream_for(3)] == ["b3-new:9092"]
    assert ports.upstream_for(4) == ()


def test_broker_port_past_65535_is_an_error():
    ports = BrokerPorts("L", "h", 65000, lambda n: True)
    with pytest.raises(ProtocolError):
        ports.advertise(1000, "b", 9092)


def test_produce_to_the_proxys_own_topic_is_exempt_only_for_its_allowed_writers():
    """The volume-usage publisher's (or an admin's) produce to an internal topic alone is never throttled nor paused
    by the proxy it reports to; a tenant's is refused, not exempted (it would be an unthrottled path to the disk
    PAUSE protects)."""
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [{"entity": {"client-id": "<default>"}, "producer_byte_rate": 1}],
            "volume_usage": {"missing_data_action": "PAUSE"},
            "admin_principals": ["User:admin"],
        }
    )
    quotas = ProxyQuotas(config)
    quotas.volume.brokers({1})  # a live broker without a snapshot: the fail-safe PAUSE
    assert quotas.volume.paused and quotas.home.reads_produce_prefix
    guard = InternalTopicGuard(quotas.internal_topics, config.admin_principals)
    scope = ConnectionScope(None, Topics(), quotas.home, guard=guard)
    internal = config.volume_usage.topic
    admin = Session("L", "10.0.0.9", user="admin")

    def produce(only_topic):
        return RequestHeader(100_000, PRODUCE, 9, 5, "c", 20, 1, -1, only_topic, topic_count=1)

    for _ in range(3):  # far over 1 byte/s, every time
        plan = plan_request(scope, admin, produce(internal))
        assert plan.throttle is None and plan.local_response is None and plan.decide is None
    for other in ("orders", None):  # another topic, or several topics: paused
        assert plan_request(scope, admin, produce(other)).decide is not None
    tenant = Session("L", "10.0.0.7")
    plan = plan_request(scope, tenant, produce(internal))
    assert plan.decide is not None  # decided on the body: refused (tests/proxy/apis/test_internal_topics.py)


@pytest.mark.parametrize("where", ["proxy", "entry"])
def test_shadow_mode_computes_and_meters_but_never_throttles(where):
    quota = {"entity": {"client-id": "<default>"}, "producer_byte_rate": 1}
    raw = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}], "quotas": [quota]}
    if where == "proxy":
        raw["settings"] = {"quota.mode": "shadow"}
    else:
        quota["mode"] = "shadow"
    quotas = ProxyQuotas(parse_config(raw))
    scope = ConnectionScope(None, Topics(), quotas.home)
    noted = []
    for _ in range(3):
        plan = plan_request(scope, SESSION, RequestHeader(100_000, PRODUCE, 9, 5, "c", 20, 1))
        assert plan.throttle is None
        noted += plan.usage.shadows  # what the request path counts and logs (accounting is the plan's data)
        assert plan.usage.shadow_throttle_ms == sum(n.decision.throttle_time_ms for n in plan.usage.shadows)
    assert {n.quota for n in noted} == {"producer_byte_rate"}
    assert len(noted) >= 2 and sum(n.decision.throttle_time_ms for n in noted) > 1000
    quotas.set_mode("enforce")
    if where == "proxy":  # the whole proxy back to enforcing: the same traffic is throttled
        assert plan_request(scope, SESSION, RequestHeader(100_000, PRODUCE, 9, 5, "c", 20, 1)).throttle is not None
