"""The usage log: what each entity did, one JSON line per entity per interval, never per request.

An entity is (listener, broker, IP, user, client id, API); connections opened are counted under (listener, broker,
IP) with no user, client id or API (they are counted before the connection has said who it is). Every record has
every field (``null`` where not known), and says where it came from and under which quota scope::

    {"time": 1795455600.0, "interval_s": 10.0, "listener": "PLAINTEXT", "ip": "10.0.0.7", "user": "ANONYMOUS",
     "client_id": "etl", "api": "Produce", "requests": 120, "request_bytes": 1966080, "response_bytes": 7200,
     "throttle_ms": 350, "shadow_throttle_ms": 0, "partition_mutations": 0, "new_producer_ids": 1,
     "connections_opened": 0, "held_ms": 350, "throttles": 2, "quota_rate": 1048576.0, "observed_rate_sum": 2150000.0,
     "proxy": "broker-1.internal:9092", "broker": null, "scope": "broker"}

``time`` is the end of the interval (epoch seconds). ``proxy`` is the proxy's id (:mod:`proxy.identity`; the
workers of one proxy share it), ``broker`` the node id of the broker whose port the connection came in on in
cluster mode (``null`` on the bootstrap port and on a sidecar, which fronts one broker), ``scope`` the
``quota.scope`` in force: what the planner needs to recommend per broker or per cluster (analytics/README.md).

What a throttle hid, for the planner's demand estimate: ``held_ms`` is the wall time the entity's connections were
held by a throttle (the union of the held spans, so never more than the time itself, however many connections and
requests were throttled; a span running past the interval's end is carried into the next interval, so a tenant held
through an interval in which it sent nothing has a record for it, with 0 bytes), ``throttles`` how many
byte-rate throttles were decided, ``observed_rate_sum`` the sum of the rates (bytes/s over Kafka's sampled window)
each was decided on, and ``quota_rate`` the byte-rate quota in force at the last of them (``null`` when no
byte-rate throttle was decided). Logs written before these fields have none: read as 0 and ``null``.

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
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator

from config.usage import UsageLogConfig
from proxy.codec.apis import API_NAMES, api_name
from proxy.ground.tasks import cancel_and_wait
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES, OVERFLOW

log = logging.getLogger(__name__)

FIELDS = (
    "requests",
    "request_bytes",
    "response_bytes",
    "throttle_ms",
    "shadow_throttle_ms",
    "partition_mutations",
    "new_producer_ids",
    "connections_opened",
)
QUEUE_BATCHES = 8  # intervals waiting for the writer; beyond, an interval's lines are dropped


THROTTLE_FIELDS = ("held_ms", "throttles", "quota_rate", "observed_rate_sum")


class UsageCounters:
    """One entity's counts in the current interval."""

    __slots__ = FIELDS + THROTTLE_FIELDS + ("held_until_ns",)

    def __init__(self) -> None:
        for name in FIELDS:
            setattr(self, name, 0)
        self.held_ms = 0.0
        self.throttles = 0
        self.quota_rate = None
        self.observed_rate_sum = 0.0
        self.held_until_ns = 0  # the end of the latest held span: later spans add only what they do not overlap

    def held(self, throttle, mute_ms: int, now_ns: int) -> None:
        """A connection of this entity held for ``mute_ms`` from ``now_ns`` by ``throttle`` (quota.primitives.decision)."""
        self.throttle_ms += mute_ms
        end = now_ns + mute_ms * 1_000_000
        if end > self.held_until_ns:
            self.held_ms += (end - max(now_ns, self.held_until_ns)) / 1e6
            self.held_until_ns = end
        if throttle.bound:
            self.throttles += 1
            self.quota_rate = throttle.bound
            self.observed_rate_sum += throttle.observed_rate


def _row(rows: dict, key: tuple, max_rows: int) -> UsageCounters:
    """``key``'s row in ``rows`` (made if none). Past ``max_rows`` rows in an interval (``quota.max.tracked.entities``),
    a new entity's counts go to its listener's, API's and broker's one ``<overflow>`` row (ip, user and client id
    ``<overflow>``), so a flood of rotating client ids or addresses keeps the interval's table, and its lines,
    bounded; what it did is still counted, together."""
    found = rows.get(key)
    if found is None:
        if len(rows) >= max_rows:
            key = (key[0], OVERFLOW, OVERFLOW, OVERFLOW, key[4], key[5])
            found = rows.get(key)
        if found is None:
            found = rows[key] = UsageCounters()
    return found


class UsageTable:
    """The counts of the current interval, by entity. Pure: no clock, no I/O. Rows added through this table have no
    broker (a sidecar's, or a cluster-mode bootstrap port's); :meth:`for_broker` gives one broker port's view.
    ``max_rows``: entities with rows of their own per interval (the rest share ``<overflow>`` rows, :func:`_row`)."""

    __slots__ = ("_rows", "broker", "max_rows")

    def __init__(self, max_rows: int = DEFAULT_MAX_TRACKED_ENTITIES) -> None:
        self._rows: dict[tuple, UsageCounters] = {}
        self.broker: int | None = None
        self.max_rows = max_rows

    def row(
        self, listener: str, ip: str | None, user: str | None, client_id: str | None, api_key: int | None
    ) -> UsageCounters:
        return _row(self._rows, (listener, ip, user, client_id, api_key, self.broker), self.max_rows)

    def for_broker(self, node_id: int) -> UsageTable:
        """Cluster mode: the same table, its rows keyed by broker ``node_id`` too (a broker port's connections)."""
        return BrokerUsage(self, node_id)

    def for_request(self, session, header) -> UsageCounters:
        """The row of the entity a request comes from: its connection's listener, IP and user, its client id and
        API (the one key every count of a request goes under)."""
        return self.row(session.listener, session.peer_ip, session.user, header.client_id, header.api_key)

    def rows_for(self, session):
        """header -> the row of a request on ``session``'s connection."""
        return lambda header: self.row(
            session.listener, session.peer_ip, session.user, header.client_id, header.api_key
        )

    def recorder(self, session) -> UsageRecorder:
        """What the request and response paths of ``session``'s connection add to this table through."""
        return UsageRecorder(self.rows_for(session))

    def __len__(self) -> int:
        return len(self._rows)

    def take(self, now_ns: int | None = None) -> dict[tuple, UsageCounters]:
        """The interval's rows; the table starts empty, but for the held time past ``now_ns`` (the connections'
        monotonic clock): what is still held is taken off the interval's row and carried into the next one."""
        rows, self._rows = self._rows, {}
        if now_ns is not None:
            for key, row in rows.items():
                if row.held_until_ns > now_ns:
                    carried = (row.held_until_ns - now_ns) / 1e6
                    row.held_ms -= carried
                    nxt = self._rows[key] = UsageCounters()
                    nxt.held_ms, nxt.held_until_ns = carried, row.held_until_ns
        return rows


class BrokerUsage(UsageTable):
    """One broker port's view of a :class:`UsageTable` (cluster mode): its rows carry the broker's node id."""

    __slots__ = ("_table",)

    def __init__(self, table: UsageTable, node_id: int) -> None:  # super().__init__ not called: no rows here
        self._table = table
        self.broker = node_id

    def row(
        self, listener: str, ip: str | None, user: str | None, client_id: str | None, api_key: int | None
    ) -> UsageCounters:
        table = self._table  # its current interval's rows (take() swaps them)
        return _row(table._rows, (listener, ip, user, client_id, api_key, self.broker), table.max_rows)

    def __len__(self) -> int:
        return len(self._table)

    def take(self, now_ns: int | None = None) -> dict[tuple, UsageCounters]:
        return self._table.take(now_ns)


class DiscardedUsage(UsageTable):
    """The usage table when no usage log is configured: every count goes to one row that nothing reads, so the
    request path adds to a row whether or not a log is kept and never branches on it."""

    __slots__ = ("_discarded",)

    def __init__(self) -> None:
        super().__init__()
        self._discarded = UsageCounters()

    def row(
        self, listener: str, ip: str | None, user: str | None, client_id: str | None, api_key: int | None
    ) -> UsageCounters:
        return self._discarded

    def for_request(self, session, header) -> UsageCounters:
        return self._discarded

    def rows_for(self, session):
        discarded = self._discarded
        return lambda header: discarded

    def recorder(self, session) -> UsageRecorder:
        return NO_USAGE_RECORDER

    def for_broker(self, node_id: int) -> UsageTable:
        return self

    def take(self, now_ns: int | None = None) -> dict[tuple, UsageCounters]:
        return {}


class UsageRecorder:
    """One connection's additions to the usage log, by request header (called on every request and response)."""

    __slots__ = ("_rows",)

    def __init__(self, rows) -> None:
        self._rows = rows  # header -> the row of the request's entity

    def request(self, header) -> None:
        row = self._rows(header)
        row.requests += 1
        row.request_bytes += header.frame_length

    def response(self, header, nbytes: int) -> None:
        self._rows(header).response_bytes += nbytes

    def throttled(self, header, throttle, mute_ms: int, now_ns: int) -> None:
        """The request's connection held for ``mute_ms`` from ``now_ns`` (monotonic) by ``throttle``."""
        self._rows(header).held(throttle, mute_ms, now_ns)


class _NoUsageRecorder(UsageRecorder):
    """No usage log: every addition is a call that does nothing (the hot path neither branches nor counts)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(None)

    def request(self, header) -> None:
        pass

    def response(self, header, nbytes: int) -> None:
        pass

    def throttled(self, header, throttle, mute_ms: int, now_ns: int) -> None:
        pass


NO_USAGE = DiscardedUsage()
NO_USAGE_RECORDER = _NoUsageRecorder()


def records(
    rows: dict[tuple, UsageCounters], end_s: float, interval_s: float, proxy: str | None = None, scope: str = "broker"
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
        record["proxy"], record["broker"], record["scope"] = proxy, broker, scope
        yield record


class RotatingWriter:
    """Appends lines to ``usage-<start>.jsonl`` files under ``dir``, a new file past ``max_file_bytes`` or
    ``max_file_age_seconds``, keeping at most ``max_files``. Runs in the writer thread only."""

    def __init__(self, config: UsageLogConfig, wall: Callable[[], float] = time.time) -> None:
        self.config = config
        self._wall = wall
        self._file = None
        self._opened_at = 0.0
        self._size = 0

    def write(self, lines: list[str]) -> None:
        data = "".join(lines).encode()
        now = self._wall()
        config = self.config
        if (
            self._file is None
            or self._size >= config.max_file_bytes
            or now - self._opened_at >= config.max_file_age_seconds
        ):
            self._rotate(now)
        self._file.write(data)
        self._file.flush()
        self._size += len(data)

    def _rotate(self, now: float) -> None:
        self.close()
        os.makedirs(self.config.dir, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{now % 1:.3f}"[1:]
        path = os.path.join(self.config.dir, f"usage-{stamp}{self.config.file_tag}.jsonl")
        self._file = open(path, "ab")
        self._opened_at, self._size = now, self._file.tell()
        self._prune()

    def _prune(self) -> None:
        names = sorted(n for n in os.listdir(self.config.dir) if n.startswith("usage-") and n.endswith(".jsonl"))
        for name in names[: max(0, len(names) - self.config.max_files)]:
            try:
                os.unlink(os.path.join(self.config.dir, name))
            except OSError as exc:
                log.warning("usage log: cannot delete old file %s: %s", name, exc)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


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
        self.proxy_id: str | None = None  # this proxy's id, written on every record: set once its listeners are bound
        self.table = UsageTable(max_rows)
        self._metrics = metrics
        self._wall = wall
        self._queue: queue.Queue = queue.Queue(QUEUE_BATCHES)
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
            lines = [
                json.dumps(r, separators=(",", ":")) + "\n"
                for r in records(*interval, proxy=self.proxy_id, scope=self.scope)
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
