"""The per-entity quota series at scale: built in the background, served as last built, never older than
``quota.metrics.refresh.ms``. Pure where it can be (the schedule, with milliseconds given), and the collector with a
manual clock: what a scrape shows, and how old it may be. No thread is started and nothing sleeps, except the one
test of the builder thread, whose waits are bounds that turn a hang into a failure."""

import threading

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from config.errors import ConfigError
from config.loader import parse_config
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.entity_series import IDLE_REFRESHES, EntitySeries, RefreshSchedule
from proxy.ops.http import build_exposition
from proxy.ops.quota_metrics import QuotaMetricsCollector
from quota.primitives.clock import ManualClock

R = 15_000


def test_few_entities_or_no_interval_build_at_every_scrape():
    schedule = RefreshSchedule(R, background_from=100)
    assert schedule.inline(100) and not schedule.inline(101)
    assert RefreshSchedule(0, background_from=100).inline(10**6)


def test_a_build_is_served_until_it_is_refresh_ms_old():
    schedule = RefreshSchedule(R)
    assert not schedule.servable(0)  # nothing built yet: the scrape waits for a build
    schedule.built(1_000, 2_400)
    assert schedule.servable(1_000 + R)
    assert not schedule.servable(1_000 + R + 1)


def test_the_next_build_is_done_before_the_last_one_is_too_old():
    """The builder starts early by twice the last build's duration and a tenth of the interval: a build up to twice
    as long as the last one is served before the previous one expires, so a scrape never waits for it."""
    schedule = RefreshSchedule(R)
    assert schedule.next_build_at() is None
    schedule.built(1_000, 2_400)  # took 1.4 s
    due = schedule.next_build_at()
    assert due == 1_000 + R - 2 * 1_400 - R // 10
    schedule.built(due, due + 2 * 1_400)  # twice as long (a loaded machine)
    assert schedule.servable(due + 2 * 1_400) and due + 2 * 1_400 < 1_000 + R  # fresh before the first expired
    schedule.built(50_000, 50_000 + 2 * R)  # a build longer than the interval: start again at once
    assert schedule.next_build_at() == 50_000


def test_the_builder_stops_when_nobody_scrapes():
    schedule = RefreshSchedule(R)
    assert schedule.idle(0)
    schedule.scraped(10_000)
    assert not schedule.idle(10_000 + IDLE_REFRESHES * R)
    assert schedule.idle(10_000 + IDLE_REFRESHES * R + 1)


def test_refresh_ms_is_checked():
    with pytest.raises(ValueError, match="refresh_ms"):
        RefreshSchedule(-1)
    with pytest.raises(ConfigError, match="quota.metrics.refresh.ms: must be between 0 and 3600000"):
        parse_config(
            {
                "upstream": {"bootstrap_servers": ["b:1"]},
                "listeners": [{"name": "L", "bind": "h:2"}],
                "settings": {"quota.metrics.refresh.ms": -5},
            }
        )


class Counting:
    def __init__(self, entities: int) -> None:
        self.n = entities
        self.renders = 0

    def render(self) -> bytes:
        self.renders += 1
        return f"# build {self.renders}\n".encode()

    def entities(self) -> int:
        return self.n


def test_a_scrape_serves_the_last_build_and_waits_only_for_a_stale_one():
    clock, source = ManualClock(0), Counting(entities=5)
    series = EntitySeries(source.render, source.entities, clock, R, background_from=10)
    assert series.scrape() == b"" and series.inline and source.renders == 0  # few: the collector builds them
    source.n = 11
    assert series.scrape() == b"# build 1\n" and not series.inline  # the first scrape at scale waits for a build
    clock.advance(R)
    assert series.scrape() == b"# build 1\n" and source.renders == 1  # served as built, R old at most
    series.build_now()  # what the builder does when due
    clock.advance(R)
    assert series.scrape() == b"# build 2\n"
    clock.advance(1)
    assert series.scrape() == b"# build 3\n"  # past R: this scrape builds
    series.close()


def scraped(registry, series) -> dict:
    text = build_exposition(registry, series).decode()
    return {
        (s.name, s.labels.get("client_id")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_collector_serves_values_at_most_refresh_ms_old():
    """At scale the quota series come from the last build: a byte recorded since shows at the next build, which is
    never more than quota.metrics.refresh.ms after it; every series appears once, fresh or built."""
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [{"entity": {"client-id": "<default>"}, "producer_byte_rate": 10**9}],
            "settings": {"quota.metrics.refresh.ms": R},
        }
    )
    clock = ManualClock(1_000_000)
    quotas = ProxyQuotas(config, clock)
    collector = QuotaMetricsCollector(quotas, pause=lambda: None)
    registry = CollectorRegistry()
    registry.register(collector)
    series = collector.series = EntitySeries(collector.render, collector.entities, clock, R, background_from=1)
    series._start_builder = lambda: None  # no thread: the test moves the clock and builds when the builder would
    quotas.produce.record_and_decide("", "a", 100)
    quotas.produce.record_and_decide("", "b", 7)
    first = scraped(registry, series)
    assert first[("kafka_quota_proxy_quota_bytes_total", "a")] == 100
    assert first[("kafka_quota_proxy_quota_shadow_mode", None)] == 0  # the other families stay in the exposition
    quotas.produce.record_and_decide("", "a", 50)
    clock.advance(R)
    assert scraped(registry, series)[("kafka_quota_proxy_quota_bytes_total", "a")] == 100  # as last built
    clock.advance(1)
    assert scraped(registry, series)[("kafka_quota_proxy_quota_bytes_total", "a")] == 150  # never older than R
    series.inline = True  # few entities again: the registry yields them itself, fresh
    assert (
        registry.get_sample_value(
            "kafka_quota_proxy_quota_bytes_total", {"quota": "producer_byte_rate", "user": "", "client_id": "a"}
        )
        == 150
    )


def test_the_builder_thread_rebuilds_while_scraped_and_stops():
    """The real thread with a manual clock: due at once (the last build is already past its refresh), it builds;
    closing it ends it. The waits are bounds, not timings."""
    clock, source = ManualClock(0), Counting(entities=11)
    built = threading.Event()
    render = source.render

    def rendering() -> bytes:
        text = render()
        if source.renders >= 2:
            built.set()
        return text

    series = EntitySeries(rendering, source.entities, clock, R, background_from=10)
    series.scrape()  # builds (1) and starts the builder
    clock.advance(R - 1)  # past next_build_at (R - R/10), still scraped recently
    with series._wake:
        series._wake.notify()
    assert built.wait(10), "the builder did not rebuild when due"
    series.close()
    series._thread.join(10)
    assert not series._thread.is_alive()
