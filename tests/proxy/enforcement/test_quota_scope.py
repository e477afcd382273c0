"""``quota.scope``: the setting (pure config), and the manager sets it gives a proxy (fake clock, no sockets).

``broker`` (the default, Kafka's semantics): in cluster mode each broker's port has its own producer_byte_rate,
consumer_byte_rate and producer_ids_rate managers; ``cluster``: every port shares the proxy's one set. The
controller mutation bucket, the volume throttle and the shadow bookkeeping stay one per proxy either way.
"""

import pytest
from prometheus_client import CollectorRegistry

from config.dynamic import RecordError, check_record
from config.errors import ConfigError
from config.loader import parse_config
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.quota_metrics import QuotaMetricsCollector
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle

SIDECAR = [{"name": "L", "bind": "127.0.0.1:9000"}]
CLUSTER = [{"name": "L", "bind": "127.0.0.1:9000", "broker_port_base": 9100}]
QUOTAS = [
    {
        "entity": {"user": "<default>"},
        "producer_byte_rate": 1000,
        "consumer_byte_rate": 1000,
        "producer_ids_rate": 1,
        "controller_mutation_rate": 1,
    }
]


def config(listeners, quotas=QUOTAS, **settings):
    return parse_config(
        {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": listeners, "quotas": quotas, "settings": settings}
    )


def test_broker_is_the_default_in_both_modes():
    assert config(SIDECAR).settings.quota_scope == "broker"
    assert config(CLUSTER).settings.quota_scope == "broker"
    assert config(CLUSTER, **{"quota.scope": "cluster"}).settings.quota_scope == "cluster"


@pytest.mark.parametrize(
    "listeners,value,message",
    [
        (CLUSTER, "per-broker", "settings.quota.scope: expected broker or cluster, got 'per-broker'"),
        (CLUSTER, 1, "settings.quota.scope: expected broker or cluster, got 1"),
        (
            SIDECAR,
            "cluster",
            "settings.quota.scope: cluster needs a listener in cluster mode (broker_port_base), or, "
            "on sidecars, quota.cluster.topic (the usage topic the sidecars share)",
        ),
    ],
)
def test_a_bad_scope_names_the_key_and_the_reason(listeners, value, message):
    with pytest.raises(ConfigError) as err:
        config(listeners, **{"quota.scope": value})
    assert str(err.value).startswith(message)


def test_cluster_is_accepted_when_some_listener_is_in_cluster_mode():
    assert (
        config(
            SIDECAR + [{"name": "C", "bind": "127.0.0.1:9001", "broker_port_base": 9200}], **{"quota.scope": "cluster"}
        ).settings.quota_scope
        == "cluster"
    )


def test_the_scope_is_static():
    """A config-topic record cannot change it (the managers are laid out at start-up)."""
    with pytest.raises(RecordError, match="quota.scope: not a dynamic setting"):
        check_record(config(CLUSTER), b'{"proxy":"settings"}', b'{"quota.scope":"cluster"}')


def quotas_for(listeners, **settings):
    clock = ManualClock(1_000_000)
    return ProxyQuotas(config(listeners, **settings), clock), clock


def test_broker_scope_in_cluster_mode_gives_each_broker_its_own_budget():
    quotas, _ = quotas_for(CLUSTER)
    one, two = quotas.for_broker(1), quotas.for_broker(2)
    assert quotas.for_broker(1) is one, "one set per broker, not per connection"
    assert len({id(q.produce) for q in (quotas, one, two)}) == 3
    assert len({id(q.fetch) for q in (quotas, one, two)}) == 3
    assert len({id(q.producer_ids) for q in (quotas, one, two)}) == 3
    assert one.mutations is two.mutations is quotas.mutations  # KIP-599: one bucket per proxy
    assert one.clock is quotas.clock and one.internal_topics is quotas.internal_topics
    assert (one.node_id, two.node_id, quotas.home.node_id) == (1, 2, None)  # the record names its budget
    # 1000 B/s each: broker 1 over its quota says nothing about broker 2
    assert isinstance(one.produce.record_and_decide("alice", "c", 50_000), Throttle)
    assert two.produce.record_and_decide("alice", "c", 500) == FORWARD
    assert quotas.produce.record_and_decide("alice", "c", 500) == FORWARD


@pytest.mark.parametrize("listeners,settings", [(CLUSTER, {"quota.scope": "cluster"}), (SIDECAR, {})])
def test_one_budget_for_every_port_otherwise(listeners, settings):
    quotas, _ = quotas_for(listeners, **settings)
    assert quotas.for_broker(1) is quotas.for_broker(2) is quotas.home
    assert [label for label, _ in quotas.quota_sets()] == [""]


def test_mode_table_housekeeping_and_removal_reach_every_set():
    quotas, clock = quotas_for(CLUSTER)
    one = quotas.for_broker(1)
    quotas.set_mode("shadow")
    later = quotas.for_broker(2)  # made after the switch: takes the mode and table in force
    for q in (quotas, one, later):
        assert q.produce.shadow and q.fetch.shadow and q.producer_ids.shadow
    quotas.update(config(CLUSTER, [{"entity": {"user": "<default>"}, "producer_byte_rate": 7}]).quotas)
    third = quotas.for_broker(3)
    for q in (quotas, one, later, third):
        assert q.produce.resolve("alice", "c").limit == 7
        assert q.fetch.resolve("alice", "c").unlimited
    for q in (one, later):
        q.produce.record_and_decide("alice", "c", 10)
        q.producer_ids.record_and_decide("alice", 42, clock.now_ms())
    clock.advance(2 * 3600 * 1000)  # past the sensors' hour idle and the producer-id windows
    assert quotas.expire_idle() == 2
    assert quotas.cleanup_producer_ids(clock.now_ms()) == 0  # the producer-id quota is gone from the table
    quotas.drop_broker(2)
    assert [label for label, _ in quotas.quota_sets()] == ["bootstrap", "1", "3"]
    assert quotas.for_broker(2) is not later, "a broker that comes back starts afresh"


def test_metrics_carry_a_node_id_label_and_count_each_set_once():
    quotas, clock = quotas_for(CLUSTER)
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas, pause=lambda: None))
    quotas.for_broker(1).produce.record_and_decide("alice", "c", 300)
    quotas.for_broker(2).produce.record_and_decide("alice", "c", 200)
    quotas.produce.record_and_decide("alice", "c", 100)
    quotas.for_broker(2).producer_ids.record_and_decide("alice", 7, clock.now_ms())
    quotas.for_broker(1).mutations.record_and_decide("alice", "c", 1)

    def value(name, broker, **labels):
        return registry.get_sample_value(name, {**labels, "node_id": broker})

    produced = {"quota": "producer_byte_rate", "user": "alice", "client_id": ""}
    assert [value("kafka_quota_proxy_quota_bytes_total", b, **produced) for b in ("1", "2", "bootstrap")] == [
        300,
        200,
        100,
    ]
    assert value("kafka_quota_proxy_quota_limit", "1", **produced) == 1000  # each broker's own quota
    assert value("kafka_quota_proxy_producer_ids_new_total", "2", user="alice") == 1
    assert value("kafka_quota_proxy_producer_ids_new_total", "1", user="alice") is None  # no id reached broker 1
    samples = [s for m in registry.collect() for s in m.samples if s.name == "kafka_quota_proxy_quota_bytes_total"]
    assert sum(s.value for s in samples) == 600 and len(samples) == 3  # nothing counted twice, nothing dropped
    mutation = [s for m in registry.collect() for s in m.samples if s.name.startswith("kafka_quota_proxy_controller")]
    assert mutation and all("node_id" not in s.labels for s in mutation)  # one bucket per proxy: no node_id label


def test_metrics_keep_todays_labels_with_one_set():
    quotas, _ = quotas_for(CLUSTER, **{"quota.scope": "cluster"})
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas, pause=lambda: None))
    quotas.for_broker(1).produce.record_and_decide("alice", "c", 300)
    quotas.for_broker(2).produce.record_and_decide("alice", "c", 200)
    assert (
        registry.get_sample_value(
            "kafka_quota_proxy_quota_bytes_total", {"quota": "producer_byte_rate", "user": "alice", "client_id": ""}
        )
        == 500
    )


def test_topic_quotas_are_one_per_proxy_whatever_the_scope_and_follow_the_mode():
    """A topic's quota is the topic's across every broker port of a cluster-mode proxy (KIP-1010's skewed leaders
    then share it), and quota.mode and quota.smoothing switch it as they switch the others."""
    topics = [{"entity": {"topic": "orders"}, "producer_byte_rate": 1000}]
    clock = ManualClock(1_000_000)
    quotas = ProxyQuotas(config(CLUSTER, topics), clock)
    one, two = quotas.for_broker(1), quotas.for_broker(2)
    assert one.topics is two.topics is quotas.home.topics is quotas.topics
    one.topics.produce.record_topic("orders", 20_000)  # a leader behind broker 1 takes the topic's whole budget
    assert isinstance(two.topics.produce.record_topic("orders", 1), Throttle)  # ... so one behind broker 2 waits
    quotas.set_mode("shadow")
    quotas.set_smoothing("on")
    assert quotas.topics.produce.shadow and quotas.topics.fetch.smoothing
    assert quotas.overflow_counts()[("topic_producer_byte_rate", "")] == 0
