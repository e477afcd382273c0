"""The dynamic configuration's health as Prometheus reads it (``kafka_quota_proxy_dynamic_config_*``), collected from
:class:`proxy.observers.dynamic_config.DynamicConfig` when it scrapes."""

from __future__ import annotations

import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from proxy.ops.metrics import PREFIX


class DynamicConfigCollector:
    """The dynamic configuration's health, at scrape time."""

    def __init__(self, dynamic) -> None:  # dynamic: proxy.observers.dynamic_config.DynamicConfig
        self._dynamic = dynamic

    def describe(self) -> list:
        return []

    def collect(self):
        d = self._dynamic
        name = f"{PREFIX}_dynamic_config"
        bad = CounterMetricFamily(
            f"{name}_bad_records",
            "Config-topic records ignored (logged with their key and "
            "reason); the last good configuration stayed in force.",
        )
        bad.add_metric([], d.bad_records)
        skipped = CounterMetricFamily(
            f"{name}_records_skipped",
            "Config-topic records skipped for a bound of the "
            "dynamic_config section (max_key_bytes, max_value_bytes, max_entries; logged "
            "once per key); the entries in force stayed.",
            labels=["reason"],
        )
        for reason, count in d.skipped.items():
            skipped.add_metric([reason], count)
        applied = CounterMetricFamily(f"{name}_applied", "Config-topic records that changed the configuration.")
        applied.add_metric([], d.applied)
        entries = GaugeMetricFamily(f"{name}_entries", "Dynamic entries in force (entities and proxy settings).")
        entries.add_metric([], len(d.entries.entries))
        lag = GaugeMetricFamily(f"{name}_lag_records", "Records of the config topic not read yet.")
        lag.add_metric([], d.lag)
        age = GaugeMetricFamily(
            f"{name}_last_read_age_seconds",
            "Seconds since the config topic was last read (grows while it cannot be; -1 before the first read).",
        )
        age.add_metric([], time.monotonic() - d.last_read if d.last_read else -1.0)
        available = GaugeMetricFamily(
            f"{name}_available",
            "1 while the config topic is read; 0 while it cannot be "
            "created or read (the YAML and the entries last read apply).",
        )
        available.add_metric([], d.available)
        yield from (bad, skipped, applied, entries, lag, age, available)
