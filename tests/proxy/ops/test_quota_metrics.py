"""Per-entity quota metrics as Prometheus reads them, with bounded label cardinality."""

from prometheus_client import CollectorRegistry

from config.loader import parse_config
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.quota_metrics import QuotaMetricsCollector
from quota.primitives.clock import ManualClock
from quota.primitives.top import OTHER


def registry_for(max_entities):
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": 100}],
            "settings": {"quota.metrics.max.entities": max_entities},
        }
    )
    quotas = ProxyQuotas(config, ManualClock(1_000_000))
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas))
    return quotas, registry


def test_entity_metrics_follow_kafka_tags():
    quotas, registry = registry_for(10)
    for _ in range(3):
        quotas.produce.record_and_decide("alice", "app-1", 600)
    labels = {"quota": "producer_byte_rate", "user": "alice", "client_id": ""}  # a user quota: client-id not a tag
    assert registry.get_sample_value("kafka_quota_proxy_quota_bytes_total", labels) == 1800
    assert registry.get_sample_value("kafka_quota_proxy_quota_limit", labels) == 100
    assert registry.get_sample_value("kafka_quota_proxy_quota_byte_rate", labels) == 180  # 1800 B over 10 s
    assert registry.get_sample_value("kafka_quota_proxy_quota_throttled_responses_total", labels) == 2
    assert registry.get_sample_value("kafka_quota_proxy_quota_throttle_time_max_seconds", labels) > 0


def test_label_cardinality_is_bounded():
    quotas, registry = registry_for(5)
    for i in range(50):
        quotas.produce.record_and_decide(f"user-{i}", "c", 10 + i)
    users = {
        s.labels["user"] for m in registry.collect() for s in m.samples if m.name == "kafka_quota_proxy_quota_bytes"
    }
    assert len(users) == 5 and OTHER in users
    total = sum(
        s.value for m in registry.collect() for s in m.samples if s.name == "kafka_quota_proxy_quota_bytes_total"
    )
    assert total == sum(10 + i for i in range(50))  # nothing lost in the aggregation


BASE = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}


def proxy_registry(quotas_section, **settings):
    config = parse_config({**BASE, "quotas": quotas_section, "settings": settings})
    quotas = ProxyQuotas(config, ManualClock(1_000_000))
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas))
    return config, quotas, registry


def test_shadow_throttles_are_scraped_apart_from_applied_ones():
    """A shadow entry 'throttles' without slowing anyone: the applied counters stay at 0 and the shadow counters,
    per entity and per quota, say what would have been applied."""
    _, quotas, registry = proxy_registry(
        [
            {
                "entity": {"client-id": "etl"},
                "producer_byte_rate": 100,
                "controller_mutation_rate": 1,
                "mode": "shadow",
            },
            {"entity": {"user": "alice"}, "producer_ids_rate": 1, "mode": "shadow"},
        ],
        **{"controller.quota.window.num": 2, "producer.id.quota.window.num": 1},
    )
    for _ in range(3):
        decision = quotas.produce.record_and_decide("alice", "etl", 100_000)
        quotas.shadows.note("producer_byte_rate", decision, "alice", "etl")
    quotas.mutations.record_and_decide("alice", "etl", 50)
    for pid in range(3):
        quotas.producer_ids.record_and_decide("alice", pid, 1_000_000)
    entity = {"quota": "producer_byte_rate", "user": "", "client_id": "etl"}
    get = registry.get_sample_value
    assert get("kafka_quota_proxy_quota_throttled_responses_total", entity) == 0
    assert get("kafka_quota_proxy_quota_throttle_time_seconds_total", entity) == 0
    assert get("kafka_quota_proxy_quota_throttle_time_max_seconds", entity) == 0
    assert get("kafka_quota_proxy_quota_entity_shadow_throttled_responses_total", entity) == 3
    shadow_s = get("kafka_quota_proxy_quota_entity_shadow_throttle_time_seconds_total", entity)
    stats = {s.tags: s for s in quotas.produce.stats(quotas.clock.now_ms())}
    (decided,) = [s.shadow_throttle_time_ms_total for tags, s in stats.items() if tags.client_id == "etl"]
    assert shadow_s == decided / 1000 > 0  # seconds, as Prometheus' base unit; the managers count milliseconds
    assert (
        get("kafka_quota_proxy_quota_shadow_throttle_time_seconds_total", {"quota": "producer_byte_rate"}) == shadow_s
    )
    mutation = {"user": "", "client_id": "etl"}
    assert get("kafka_quota_proxy_controller_mutation_throttled_requests_total", mutation) == 0
    assert get("kafka_quota_proxy_controller_mutation_throttle_time_seconds_total", mutation) == 0
    assert get("kafka_quota_proxy_controller_mutation_shadow_throttled_requests_total", mutation) == 1
    assert get("kafka_quota_proxy_producer_ids_throttled_requests_total", {"user": "alice"}) == 0
    assert get("kafka_quota_proxy_producer_ids_throttle_time_seconds_total", {"user": "alice"}) == 0
    assert get("kafka_quota_proxy_producer_ids_shadow_throttled_requests_total", {"user": "alice"}) == 2


def test_quota_limits_follow_a_deleted_dynamic_entry_back():
    """Dynamic entries over the YAML, then deleted (a tombstone, as AlterClientQuotas' remove writes it): every
    ``_limit`` gauge reports the quota that applies now, the YAML one or none."""
    from config.dynamic import entity_key
    from config.dynamic_state import Batch, DynamicState

    pair = {"user": "alice", "client-id": "etl"}
    base, quotas, registry = proxy_registry([{"entity": {"user": "alice"}, "producer_byte_rate": 100}])
    batch = Batch(DynamicState.initial(base))  # one poll of the config topic
    batch.add(entity_key(pair), b'{"producer_byte_rate": 5000}')
    batch.add(entity_key({"client-id": "etl"}), b'{"controller_mutation_rate": 7, "consumer_byte_rate": 300}')
    batch.add(entity_key({"user": "alice"}), b'{"producer_ids_rate": 9}')
    state = batch.built()
    quotas.apply(state.config)
    quotas.produce.record_and_decide("alice", "etl", 10)
    quotas.fetch.record_and_decide("alice", "etl", 10)
    quotas.mutations.record_and_decide("alice", "etl", 1)
    quotas.producer_ids.record_and_decide("alice", 1, 1_000_000)
    get = registry.get_sample_value
    produce = {"quota": "producer_byte_rate", "user": "alice", "client_id": "etl"}
    assert get("kafka_quota_proxy_quota_limit", produce) == 5000
    batch = Batch(state)
    for key in (entity_key(pair), entity_key({"client-id": "etl"}), entity_key({"user": "alice"})):
        batch.add(key, None)  # tombstones
    quotas.apply(batch.built().config)
    assert get("kafka_quota_proxy_quota_limit", produce) is None  # these tags carry no quota now
    assert get("kafka_quota_proxy_quota_limit", {**produce, "client_id": ""}) == 100  # the YAML /users/alice
    assert get("kafka_quota_proxy_quota_limit", {"quota": "consumer_byte_rate", "user": "", "client_id": "etl"}) is None
    assert get("kafka_quota_proxy_controller_mutation_limit", {"user": "", "client_id": "etl"}) is None
    assert get("kafka_quota_proxy_producer_ids_limit", {"user": "alice"}) is None


def test_a_full_sensor_table_is_counted_and_logged_once_a_minute(caplog):
    """quota.max.tracked.entities: rotating client ids past the cap (each evicting an unused one, issue 44) are counted
    in quota_overflowed_records_total and said in one warning a minute, not one per record (issue 35)."""
    _, quotas, registry = proxy_registry(
        [{"entity": {"client-id": "<default>"}, "producer_byte_rate": 1000}], **{"quota.max.tracked.entities": 100}
    )
    labels = {"quota": "producer_byte_rate"}
    assert registry.get_sample_value("kafka_quota_proxy_quota_overflowed_records_total", labels) == 0
    with caplog.at_level("WARNING", logger="proxy.enforcement.proxy_quotas"):
        assert quotas.note_overflow() is None  # nothing overflowed yet
        for i in range(300):
            quotas.produce.record_and_decide("", f"rotating-{i}", 10)
        assert "quota.max.tracked.entities (100) reached" in quotas.note_overflow()
        for i in range(300, 400):
            quotas.produce.record_and_decide("", f"rotating-{i}", 10)
        assert quotas.note_overflow() is None  # within the minute
        quotas.clock.advance(60_000)
        assert "producer_byte_rate: 100" in quotas.note_overflow()  # the records since the last line
    assert len([r for r in caplog.records if "max.tracked.entities" in r.getMessage()]) == 2
    assert registry.get_sample_value("kafka_quota_proxy_quota_overflowed_records_total", labels) == 300
    assert len(quotas.produce) == 100


def test_the_cap_bounds_producer_id_users_and_mutation_buckets_and_says_so(caplog):
    """quota.max.tracked.entities reaches the producer-id quota's users and the mutation quota's buckets too: past
    it they evict to make room, counted per quota in quota_overflowed_records_total and named in the warning (issues
    35, 44)."""
    _, quotas, registry = proxy_registry(
        [
            {"entity": {"user": "<default>"}, "producer_ids_rate": 10},
            {"entity": {"client-id": "<default>"}, "controller_mutation_rate": 10},
        ],
        **{"quota.max.tracked.entities": 100},
    )
    now = quotas.clock.now_ms()
    for i in range(150):
        quotas.producer_ids.record_and_decide(f"user-{i}", i, now)
        quotas.mutations.record("", f"client-{i}", 1)
    assert len(quotas.producer_ids) == 100 and len(quotas.mutations) == 100  # evictions in both
    get = registry.get_sample_value
    assert get("kafka_quota_proxy_quota_overflowed_records_total", {"quota": "producer_ids_rate"}) == 50
    assert get("kafka_quota_proxy_quota_overflowed_records_total", {"quota": "controller_mutation_rate"}) == 50
    with caplog.at_level("WARNING", logger="proxy.enforcement.proxy_quotas"):
        line = quotas.note_overflow()
    assert "producer_ids_rate: 50" in line and "controller_mutation_rate: 50" in line


def test_partition_metrics_name_partitions_with_an_entry_and_sum_the_rest_per_topic():
    """A partition's series exist for partitions with an entry of their own; the partitions under a topic's
    partition: <default> are counted in one partition="<default>" series of that topic, so a tenant writing thousands
    of partitions adds no label value; evictions are counted under the partition quota's name."""
    _, quotas, registry = proxy_registry(
        [
            {"entity": {"topic": "orders", "partition": 3}, "producer_byte_rate": 100},
            {"entity": {"topic": "orders", "partition": "<default>"}, "producer_byte_rate": 1000},
        ],
        **{"quota.max.tracked.entities": 100},
    )
    partitions = quotas.topics.partition_produce
    for i in range(2_000):
        partitions.record_topic(("orders", 100 + i), 10)
    for _ in range(3):
        partitions.record_topic(("orders", 3), 600)
    partitions.record_topic(("clicks", 0), 10**6)  # no entry covers it: nothing counted

    def sample(name, partition):
        labels = {"quota": "producer_byte_rate", "topic": "orders", "partition": partition}
        return registry.get_sample_value(f"kafka_quota_proxy_partition_quota_{name}", labels)

    assert sample("bytes_total", "3") == 1800 and sample("limit", "3") == 100
    assert sample("throttled_requests_total", "3") == 2
    assert sample("limit", "<default>") == 1000 and sample("byte_rate", "<default>") is None
    assert sample("bytes_total", "<default>") <= 1000  # the ones still tracked: the table is bounded
    labels = {
        (s.labels["topic"], s.labels["partition"])
        for m in registry.collect()
        for s in m.samples
        if s.name == "kafka_quota_proxy_partition_quota_bytes_total"
    }
    assert labels == {("orders", "3"), ("orders", "<default>")}
    overflowed = registry.get_sample_value(
        "kafka_quota_proxy_quota_overflowed_records_total", {"quota": "partition_producer_byte_rate"}
    )
    assert overflowed >= 1_900


def test_topic_metrics_name_topics_with_an_entry_and_sum_the_rest_under_default():
    """A topic's series exist for topics with an entry of their own; every other topic is counted in one
    topic="<default>" series, so topics a client makes up never add a label value."""
    _, quotas, registry = proxy_registry(
        [
            {"entity": {"topic": "orders"}, "producer_byte_rate": 100},
            {"entity": {"topic": "<default>"}, "producer_byte_rate": 1000, "consumer_byte_rate": 50},
        ]
    )
    for _ in range(3):
        quotas.topics.produce.record_topic("orders", 600)
    for i in range(40):
        quotas.topics.produce.record_topic(f"made-up-{i}", 10)
    quotas.topics.fetch.record_topic("orders", 5)

    def sample(name, quota, topic):
        return registry.get_sample_value(f"kafka_quota_proxy_topic_quota_{name}", {"quota": quota, "topic": topic})

    assert sample("bytes_total", "producer_byte_rate", "orders") == 1800
    assert sample("limit", "producer_byte_rate", "orders") == 100
    assert sample("byte_rate", "producer_byte_rate", "orders") == 180  # 1800 B over 10 s
    assert sample("throttled_requests_total", "producer_byte_rate", "orders") == 2
    assert sample("bytes_total", "producer_byte_rate", "<default>") == 400
    assert sample("limit", "producer_byte_rate", "<default>") == 1000
    assert sample("byte_rate", "producer_byte_rate", "<default>") is None  # many topics: no one rate
    assert sample("bytes_total", "consumer_byte_rate", "<default>") == 5  # no consumer quota of its own
    topics = {
        s.labels["topic"]
        for m in registry.collect()
        for s in m.samples
        if s.name == "kafka_quota_proxy_topic_quota_bytes_total"
    }
    assert topics == {"orders", "<default>"}
