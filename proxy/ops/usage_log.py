"""The usage log: what each entity did, one JSON line per entity per interval, never per request.

An entity is (listener, broker, IP, user, client id, API); connections opened are counted under (listener, broker,
IP) with no user, client id or API (they are counted before the connection has said who it is). Every record has
every field (``null`` where not known), and says where it came from and under which quota scope::

    {"time": 1795455600.0, "interval_s": 10.0, "listener": "PLAINTEXT", "ip": "10.0.0.7", "user": "ANONYMOUS",
     "client_id": "etl", "api": "Produce", "requests": 120, "request_bytes": 1966080, "response_bytes": 7200,
     "throttle_ms": 350, "shadow_throttle_ms": 0, "partition_mutations": 0, "new_producer_ids": 1,
     "connections_opened": 0, "held_ms": 350, "throttles": 2, "quota_rate": 1048576.0, "observed_rate_sum": 2150000.0,
     "held_by": {"producer_byte_rate": 2}, "proxy": "broker-1.internal:9092", "broker": null, "scope": "broker"}

``time`` is the end of the interval (epoch seconds). ``proxy`` is the proxy's id (:mod:`proxy.ground.identity`; the
workers of one proxy share it), ``broker`` the node id of the broker whose port the connection came in on in
cluster mode (``null`` on the bootstrap port and on a sidecar, which fronts one broker), ``scope`` the
``quota.scope`` in force: what the planner needs to recommend per broker or per cluster (analytics/README.md).

What a throttle hid, for the planner's demand estimate: ``held_ms`` is the wall time the entity's connections were
held by a throttle (the union of the held spans, so never more than the time itself, however many connections and
requests were throttled; a span running past the interval's end is carried into the next interval, so a tenant held
through an interval in which it sent nothing has a record for it, with 0 bytes), ``throttles`` how many
throttles a client quota on Kafka's sampled rate decided (a byte rate; on the APIs ``request_rate`` counts, a request
rate), ``observed_rate_sum`` the sum of the rates (over Kafka's sampled window) each was decided on, and
``quota_rate`` that quota in force at the last of them (bytes/s, or a request rate's requests/s; ``null`` when none
was decided), and ``held_by`` how many of its requests were held, by the quota that held each
(the longest hold's, when several quotas throttled one request: ``{"request_rate": 3, "topic_producer_byte_rate": 2}``;
``null`` when none), which tells the planner a hold by a request rate or a topic quota from a byte rate's. Logs
written before these fields have none: read as 0 and ``null``.
``quota_group`` names the quota group the user or client id is a member of (``null``: none).

The request path adds to a :class:`UsageTable` (dict lookups
and integer additions); every ``interval_seconds`` the table is swapped for a fresh one and the old one goes to a
writer thread through a bounded queue; the thread turns it into lines and writes them, so the event loop neither
serialises nor waits for the disk. When the writer
falls behind or the disk refuses a write (full, read-only), the lines are dropped, counted
(``usage_log_dropped_records_total``) and logged; the proxy goes on. Files are ``usage-<start>.jsonl`` in the
configured directory, rotated by size and age, the oldest deleted beyond ``max_files``. On shutdown the current
interval is written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator

from config.usage import UsageLogConfig
from proxy.codec.apis import API_NAMES, api_name
from proxy.ground.tasks import cancel_and_wait
from proxy.ops.usage_files import RotatingWriter
from proxy.ops.usage_table import FIELDS, UsageCounters, UsageTable
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES
from quota.primitives.quota_groups import NO_GROUPS, QuotaGroups

log = logging.getLogger(__name__)

QUEUE_BATCHES = 8  # intervals waiting for the writer; beyond, an interval's lines are dropped


def records(
    rows: dict[tuple, UsageCounters],
    end_s: float,
    interval_s: float,
    proxy: str | None = None,
    scope: str = "broker",
    groups: QuotaGroups = NO_GROUPS,
) -> Iterator[dict]:
    for (listener, ip, user, client_id, api_key, broker), counts in rows.items():
        record = {
            "time": round(end_s, 3),
            "interval_s": interval_s,
            "listener": listener,
            "ip": ip,
            "user": user,
            "client_id": client_id,
            "api": None if api_key is None else (api_name(api_key) if api_key in API_NAMES else "Unknown"),
        }
        for name in FIELDS:
            record[name] = getattr(counts, name)
        record["held_ms"] = round(counts.held_ms)
        record["throttles"] = counts.throttles
        record["quota_rate"] = counts.quota_rate
        record["observed_rate_sum"] = round(counts.observed_rate_sum, 1)
        record["topic_bytes"] = counts.topic_bytes
        record["group_requests"] = counts.group_requests
        record["held_by"] = counts.held_by
        record["quota_group"] = groups.name_of(user or "", client_id or "") if groups else None
        record["partition_bytes"] = counts.partition_bytes
        record["proxy"], record["broker"], record["scope"] = proxy, broker, scope
        yield record


class UsageLog:
    """Swaps the table every interval and hands its lines to the writer thread."""

    def __init__(
        self,
        config: UsageLogConfig,
        metrics,
        wall: Callable[[], float] = time.time,
        scope: str = "broker",
        max_rows: int = DEFAULT_MAX_TRACKED_ENTITIES,
    ) -> None:
        self.config = config
        self.scope = scope  # quota.scope, written on every record
        self.groups: Callable[[], QuotaGroups] = lambda: NO_GROUPS  # the quota groups in force (the app's table)
        self.proxy_id: str | None = None  # this proxy's id, written on every record: set once its listeners are bound
        self.table = UsageTable(max_rows)
        self._metrics = metrics
        self._wall = wall
        # (rows, end of the interval, its length) for the writer thread; None: the last
        self._queue: queue.Queue[tuple[dict[tuple, UsageCounters], float, float] | None] = queue.Queue(QUEUE_BATCHES)
        self._writer = RotatingWriter(config, wall)
        self._thread = threading.Thread(target=self._write_loop, name="usage-log", daemon=True)
        self._task: asyncio.Task | None = None
        self._interval_start = wall()
        self._failing = False

    def start(self) -> None:
        self._thread.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(0.0, self._interval_start + self.config.interval_seconds - self._wall()))
            self.flush_interval()

    def flush_interval(self) -> None:
        """The current interval's records go to the writer (or are dropped, counted, if it is behind)."""
        now = self._wall()
        rows = self.table.take(time.monotonic_ns())  # the connections' clock: held time past now is carried over
        interval = round(now - self._interval_start, 3)
        self._interval_start = now
        if not rows:
            return
        try:  # the rows are no longer written to: the writer thread turns them into lines
            self._queue.put_nowait((rows, now, interval))
        except queue.Full:
            self._dropped(len(rows), "the writer is behind (is the disk slow?)")

    def _dropped(self, count: int, why: str) -> None:
        self._metrics.usage_log_dropped.inc(count)
        if not self._failing:
            log.error(
                "usage log: %d records dropped: %s; the proxy goes on (usage_log_dropped_records_total counts "
                "what is lost)",
                count,
                why,
            )
        self._failing = True

    def _write_loop(self) -> None:
        while True:
            interval = self._queue.get()
            if interval is None:
                break
            rows, end_s, interval_s = interval
            lines = [
                json.dumps(r, separators=(",", ":")) + "\n"
                for r in records(rows, end_s, interval_s, self.proxy_id, self.scope, self.groups())
            ]
            try:
                self._writer.write(lines)
            except OSError as exc:
                self._writer.close()
                self._dropped(len(lines), f"cannot write to {self.config.dir}: {exc.strerror or exc}")
                continue
            self._metrics.usage_log_records.inc(len(lines))
            if self._failing:
                log.warning("usage log: writing again to %s", self.config.dir)
                self._failing = False
        self._writer.close()

    async def stop(self) -> None:
        """Writes the current interval, then waits (off the loop) for the writer to finish."""
        await cancel_and_wait(self._task)
        self.flush_interval()
        self._queue.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 10)
