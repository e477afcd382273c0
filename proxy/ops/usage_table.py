"""What the request path adds to the usage log: one row of counts per entity in the current interval, kept in a
:class:`UsageTable` (dict lookups and integer additions, no clock, no I/O) that :mod:`proxy.ops.usage_log` swaps for a
fresh one every interval; and the per-connection recorder the request and response paths add through.

An entity is (listener, IP, user, client id, API, broker); a table holds at most ``quota.max.tracked.entities`` rows
per interval, the rest counted together under ``<overflow>``. With no usage log configured the request path adds to
:data:`NO_USAGE` and :data:`NO_USAGE_RECORDER`, which keep nothing.
"""

from __future__ import annotations

from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES, OVERFLOW

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


THROTTLE_FIELDS = ("held_ms", "throttles", "quota_rate", "observed_rate_sum", "held_by")
LABELLED_FIELDS = ("topic_bytes", "group_requests", "partition_bytes")  # counts by a label the configuration bounds
UNNAMED = "other"  # held_by's name for a throttle that names no quota


class UsageCounters:
    """One entity's counts in the current interval."""

    __slots__ = FIELDS + THROTTLE_FIELDS + LABELLED_FIELDS + ("held_until_ns",)
    # FIELDS, set to 0 by __init__
    requests: int
    request_bytes: int
    response_bytes: int
    throttle_ms: int
    shadow_throttle_ms: int
    partition_mutations: int
    new_producer_ids: int
    connections_opened: int
    quota_rate: float | None  # the rate quota of the last throttle that says one (throttle.bound); None: none
    topic_bytes: dict[str, int] | None  # record bytes charged to topic quotas, by topic label; None: none
    group_requests: dict[str, int] | None  # requests counted against group request rates, by group label; None: none
    partition_bytes: dict[str, int] | None  # record bytes charged to partition quotas, by partition label; None: none
    held_by: dict[str, int] | None  # requests whose connection a throttle held, by the quota that held it; None: none

    def __init__(self) -> None:
        for name in FIELDS:
            setattr(self, name, 0)
        self.held_ms = 0.0
        self.throttles = 0
        self.quota_rate = None
        self.observed_rate_sum = 0.0
        self.topic_bytes = self.group_requests = self.partition_bytes = self.held_by = None
        self.held_until_ns = 0  # the end of the latest held span: later spans add only what they do not overlap

    def held(self, throttle, mute_ms: int, now_ns: int) -> None:
        """A connection of this entity held for ``mute_ms`` from ``now_ns`` by ``throttle`` (quota.primitives.decision):
        counted under the quota that held it (its ``by``: ``request_rate``, ``topic_producer_byte_rate``, ..., the
        topic or group it names left out, so the names are the quotas', a handful)."""
        self.throttle_ms += mute_ms
        if mute_ms > 0:
            quota = throttle.by.partition(" (")[0] or UNNAMED
            held_by = self.held_by
            if held_by is None:
                held_by = self.held_by = {}
            held_by[quota] = held_by.get(quota, 0) + 1
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

    def planned(self, header, usage) -> None:
        """What the request's plan or outcome accounted for (:class:`proxy.apis.usage.Usage`)."""
        row = self._rows(header)
        row.shadow_throttle_ms += usage.shadow_throttle_ms
        row.new_producer_ids += usage.new_producer_ids
        row.partition_mutations += usage.partition_mutations
        for name in LABELLED_FIELDS:
            pairs = getattr(usage, name)
            if pairs:
                counted = getattr(row, name)
                if counted is None:
                    counted = {}
                    setattr(row, name, counted)
                for label, n in pairs:
                    counted[label] = counted.get(label, 0) + n


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

    def planned(self, header, usage) -> None:
        pass


NO_USAGE = DiscardedUsage()
NO_USAGE_RECORDER = _NoUsageRecorder()
