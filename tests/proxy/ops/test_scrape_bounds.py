"""A scrape's size does not grow with the tenants: every per-entity family exports at most
``quota.metrics.max.entities`` series per quota (the busiest, then ``__other__``), and ``__other__`` is the exact sum of
the entities it stands for, so ``sum()`` over a family stays the proxy's total."""

from collections import defaultdict

import pytest
from prometheus_client import CollectorRegistry

from config.loader import parse_config
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.quota_metrics import QuotaMetricsCollector
from quota.primitives.clock import ManualClock
from quota.primitives.top import CHUNK, OTHER

pytestmark = pytest.mark.long_running(seconds=10)

# Far more entities than series (N), spread over four of the scrape's chunks, so the busiest are picked across chunks
# and __other__ is summed over all of them: what 100,000 entities proved, in 1 s instead of 10-50 s of CPU.
ENTITIES = 3 * CHUNK + 1000
N = 10


def scraped(n_entities: int):
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [
                {"entity": {"client-id": "<default>"}, "producer_byte_rate": 10**9, "controller_mutation_rate": 10**6},
                {"entity": {"user": "<default>"}, "producer_ids_rate": 10**6},
            ],
            "settings": {"quota.metrics.max.entities": N, "producer.id.quota.bloom.expected.pids": 1},
        }
    )
    quotas = ProxyQuotas(config, ManualClock(1_000_000))
    produced, mutated, pids = {}, {}, {}
    for i in range(n_entities):
        produced[f"c{i}"] = 10 + (i * 7919) % 100_003  # distinct-ish values in no particular order
        quotas.produce.record_and_decide("u", f"c{i}", produced[f"c{i}"])
        mutated[f"c{i}"] = 1 + (i * 31) % 977
        quotas.mutations.record_and_decide("u", f"c{i}", mutated[f"c{i}"])
        pids[f"user{i}"] = 1 + (i % 7 == 0)
        for pid in range(pids[f"user{i}"]):
            quotas.producer_ids.record_and_decide(f"user{i}", pid, 1_000_000)
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(quotas))
    return registry, produced, mutated, pids


def series(registry, sample_name: str, key: str) -> dict[str, float]:
    return {s.labels[key]: s.value for m in registry.collect() for s in m.samples if s.name == sample_name}


def test_every_per_entity_family_is_bounded_and_other_is_the_sum_of_the_rest():
    registry, produced, mutated, pids = scraped(ENTITIES)
    per_family: dict[tuple[str, str], int] = defaultdict(int)
    for family in registry.collect():
        for s in family.samples:
            if {"user", "client_id"} & s.labels.keys() and not {"ip"} & s.labels.keys():
                per_family[(s.name, s.labels.get("quota", ""))] += 1
    assert per_family, "no per-entity series at all"
    assert max(per_family.values()) <= N + 1, {k: v for k, v in per_family.items() if v > N + 1}
    for sample, key, truth in (
        ("kafka_quota_proxy_quota_bytes_total", "client_id", produced),
        ("kafka_quota_proxy_controller_mutations_total", "client_id", mutated),
        ("kafka_quota_proxy_producer_ids_new_total", "user", pids),
    ):
        exported = series(registry, sample, key)
        assert OTHER in exported and len(exported) <= N + 1, sample
        top = set(exported) - {OTHER}
        assert all(exported[k] == truth[k] for k in top), sample
        assert exported[OTHER] == sum(v for k, v in truth.items() if k not in top), sample
        assert min(truth[k] for k in top) >= max(v for k, v in truth.items() if k not in top), sample  # the busiest


def test_few_entities_are_all_exported_without_other():
    registry, produced, mutated, pids = scraped(N)
    assert series(registry, "kafka_quota_proxy_quota_bytes_total", "client_id") == produced
    assert series(registry, "kafka_quota_proxy_controller_mutations_total", "client_id") == mutated
    assert series(registry, "kafka_quota_proxy_producer_ids_new_total", "user") == pids
