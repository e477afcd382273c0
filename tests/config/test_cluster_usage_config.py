"""``quota.cluster.*`` (issue 26, pure config): sidecars accept ``quota.scope: cluster`` once they share a usage
topic, and every inconsistent combination is refused naming the key and the reason."""

import pytest

from config.errors import ConfigError
from config.loader import parse_config
from proxy.apis import AnswerLocally, ConnectionScope, Session
from proxy.cluster.topics import Topics
from proxy.codec.apis import PRODUCE
from proxy.codec.error_codes import TOPIC_AUTHORIZATION_FAILED
from proxy.codec.messages import decode_response
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from tests.proxy.internal_topic_plans import TENANT, NobodyIsOwn, plan_and_body, produce

SIDECAR = [{"name": "L", "bind": "127.0.0.1:9000"}]
CLUSTER = [{"name": "L", "bind": "127.0.0.1:9000", "broker_port_base": 9100}]
TOPIC = "__kafka_quota_proxy_usage"


def config(listeners=SIDECAR, **settings):
    return parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": listeners,
            "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": 1000}],
            "settings": settings,
        }
    )


def test_a_sidecar_with_a_usage_topic_accepts_cluster_scope_with_the_defaults():
    settings = config(**{"quota.scope": "cluster", "quota.cluster.topic": TOPIC}).settings
    assert (settings.quota_cluster_topic, settings.quota_cluster_id) == (TOPIC, None)
    assert (settings.quota_cluster_sync_ms, settings.quota_cluster_stale_ms) == (1000, 10_000)
    assert config().settings.quota_cluster_topic is None


@pytest.mark.parametrize("listeners,workers", [(SIDECAR, 2), (CLUSTER, 1), (CLUSTER, 3)])
def test_workers_and_cluster_mode_proxies_share_a_usage_topic_too(listeners, workers):
    """Sidecars with workers (the parent publishes for them) and cluster-mode replicas in front of one cluster."""
    settings = config(
        listeners, **{"quota.scope": "cluster", "quota.cluster.topic": TOPIC, "workers": workers}
    ).settings
    assert (settings.quota_cluster_topic, settings.workers) == (TOPIC, workers)


def test_sidecars_sharing_usage_smooth_by_default_and_keep_an_explicit_off():
    """With a usage topic, quota.smoothing defaults to on: the token bucket keeps the proxies' total at the quota where
    Kafka's sampled rate let three sidecars admit up to 1.3 x (bench/cluster_budget.py); off stays possible."""
    shared = {"quota.scope": "cluster", "quota.cluster.topic": TOPIC}
    assert config(**shared).settings.quota_smoothing == "on"
    assert config(**shared, **{"quota.smoothing": "off"}).settings.quota_smoothing == "off"
    assert config().settings.quota_smoothing == "off"


def test_the_usage_topic_is_guarded_as_one_of_the_proxys_internal_topics():
    """A tenant's Produce to the usage topic is answered TOPIC_AUTHORIZATION_FAILED by the proxy and never reaches
    the broker; an admin principal's is forwarded (tests/proxy/apis/test_internal_topics.py has the guard's other paths)."""
    cfg = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": SIDECAR,
            "admin_principals": ["User:admin"],
            "settings": {"quota.scope": "cluster", "quota.cluster.topic": TOPIC},
        }
    )
    quotas = ProxyQuotas(cfg, ManualClock(0))
    assert TOPIC in quotas.internal_topics
    scope = ConnectionScope(
        None,
        Topics(),
        quotas.home,
        guard=InternalTopicGuard(quotas.internal_topics, cfg.admin_principals, own=NobodyIsOwn()),
    )
    _, plan, body = plan_and_body(scope, TENANT, PRODUCE, 9, produce(TOPIC))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    answer = decode_response(PRODUCE, 9, outcome.frame[9:])
    assert {p.error_code for t in answer.responses for p in t.partition_responses} == {TOPIC_AUTHORIZATION_FAILED}
    assert scope.guard.refused_total == {(TOPIC, "Produce"): 1}
    _, plan, _ = plan_and_body(scope, Session("L", "10.0.0.8", user="admin"), PRODUCE, 9, produce(TOPIC))
    assert plan.decide is None  # an admin's: streamed to the broker unchecked


@pytest.mark.parametrize(
    "listeners,settings,message",
    [
        (
            SIDECAR,
            {"quota.scope": "cluster", "quota.cluster.topic": "bad topic"},
            "settings.quota.cluster.topic: expected a Kafka topic name",
        ),
        (
            SIDECAR,
            {"quota.scope": "cluster", "quota.cluster.topic": ".."},
            "settings.quota.cluster.topic: expected a Kafka topic name",
        ),
        (
            SIDECAR,
            {"quota.cluster.topic": TOPIC},
            "settings.quota.cluster.topic: proxies share usage only under quota.scope: cluster",
        ),
        (
            CLUSTER,
            {"quota.scope": "broker", "quota.cluster.topic": TOPIC},
            "settings.quota.cluster.topic: proxies share usage only under quota.scope: cluster",
        ),
        (
            SIDECAR,
            {"quota.cluster.id": "a"},
            "settings.quota.cluster.id: only means something with quota.cluster.topic",
        ),
        (
            SIDECAR,
            {"quota.scope": "cluster", "quota.cluster.topic": TOPIC, "quota.cluster.id": ""},
            "settings.quota.cluster.id: expected a non-empty name",
        ),
        (
            SIDECAR,
            {"quota.scope": "cluster", "quota.cluster.topic": TOPIC, "quota.cluster.stale.ms": 1500},
            "settings.quota.cluster.stale.ms: must be at least twice quota.cluster.sync.ms (1000)",
        ),
        (
            SIDECAR,
            {"quota.scope": "cluster", "quota.cluster.topic": TOPIC, "quota.cluster.forget.ms": 9999},
            "settings.quota.cluster.forget.ms: must be at least quota.cluster.stale.ms (10000)",
        ),
        (
            SIDECAR,
            {"quota.scope": "cluster", "quota.cluster.topic": TOPIC, "quota.cluster.sync.ms": 10},
            "settings.quota.cluster.sync.ms: must be between 50 and 60000",
        ),
    ],
)
def test_a_bad_combination_names_the_key_and_the_reason(listeners, settings, message):
    with pytest.raises(ConfigError) as err:
        config(listeners, **settings)
    assert str(err.value).startswith(message), str(err.value)
