"""The dynamic configuration changed by what the config topic's records change, never rebuilt whole.

:class:`DynamicState` is what is in force: the entries read, the effective configuration they give, and the
per-IP rates behind it. A :class:`Batch` takes the records of one poll (or, at start-up, of the whole topic), each
checked on its own (:func:`config.dynamic.check_record`, work independent of the number of entries) and bounded
by the ``dynamic_config`` section (key and value sizes, entries in force): a later record for a key replaces an
earlier one. :meth:`Batch.build` then makes the next state from the one in force in work linear in the keys the
batch changed (the quota table, the entries and the IP rates are :class:`quota.primitives.chunked.ChunkedMap`: the new state
shares every part the batch did not touch; so do the topic and group quota tables), in parts the caller may interleave with other work. The state in force
is not changed: the caller swaps the new one in with one reference, so nobody ever sees half a batch.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from config.dynamic import Checked, DynamicEntries, RecordError, check_record
from config.dynamic_source import DynamicConfigSource
from config.model import ProxyConfig
from quota.primitives.chunked import REMOVED, ChunkedMap
from quota.primitives.entity import QuotaEntry
from quota.primitives.topic_quotas import TableKey

SKIP_REASONS = ("key_too_large", "value_too_large", "too_many_entries")
STEP = 200
"""Changes applied between two yields of :meth:`Batch.build` (about a millisecond of work)."""


class RecordSkipped(RecordError):
    """A record past a bound of the ``dynamic_config`` section (``reason`` one of :data:`SKIP_REASONS`): skipped,
    unread when its size is the reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DynamicState:
    """What is in force: the YAML (``base``), the entries read, the effective configuration, its IP rates."""

    base: ProxyConfig
    entries: DynamicEntries
    config: ProxyConfig
    ip_rates: ChunkedMap

    @classmethod
    def initial(cls, base: ProxyConfig) -> DynamicState:
        """The YAML alone (its configuration object itself)."""
        return cls(base, DynamicEntries(), base, ChunkedMap(base.connections.ip_rates))


class Batch:
    """Records checked one by one against ``state`` and each other, then :meth:`build` into the next state."""

    def __init__(self, state: DynamicState, bounds: DynamicConfigSource | None = None) -> None:
        self.state = state
        self.bounds = bounds or DynamicConfigSource()
        self.changes: dict[bytes, Checked] = {}
        self.result: DynamicState | None = None
        self._size = len(state.entries.entries)

    def __len__(self) -> int:
        """The keys changed so far."""
        return len(self.changes)

    @property
    def size(self) -> int:
        """The entries there will be once built."""
        return self._size

    def add(self, key: bytes | None, value: bytes | None) -> Checked:
        """One record, after those added before it. Raises :class:`RecordSkipped` for one past a bound (its key
        and value are not parsed when their size is the reason), :class:`RecordError` for one that cannot be used;
        either way nothing is changed."""
        bounds = self.bounds
        if key is not None and len(key) > bounds.max_key_bytes:
            raise RecordSkipped(
                "key_too_large",
                f"a key of {len(key)} bytes, more than max_key_bytes ({bounds.max_key_bytes}): skipped unread",
            )
        if value is not None and len(value) > bounds.max_value_bytes:
            raise RecordSkipped(
                "value_too_large",
                f"a value of {len(value)} bytes, more than max_value_bytes ({bounds.max_value_bytes}): skipped unread",
            )
        checked = check_record(self.state.base, key, value)
        earlier = self.changes.get(checked.canonical)
        present = (
            (earlier.values is not None) if earlier is not None else checked.canonical in self.state.entries.entries
        )
        now = checked.values is not None
        if now and not present and self._size >= bounds.max_entries:
            raise RecordSkipped(
                "too_many_entries",
                f"{checked.canonical[:100].decode(errors='replace')}: a new "
                f"entry, and {self._size} are in force (max_entries {bounds.max_entries})",
            )
        self._size += now - present
        self.changes[checked.canonical] = checked
        return checked

    def build(self, step: int = STEP) -> Iterator[None]:
        """Make the next state (:attr:`result`) from the state in force and the changes, ``step`` changes at a time,
        yielding between two parts so the caller can let other work run (the state in force is not touched; each
        chunk of its maps is copied at most once for the whole batch)."""
        state, base = self.state, self.state.base
        config = state.config
        expected = len(self.changes)  # at most this many keys added: each map is laid out for its size once
        current = state.entries.entries
        entries = (current if isinstance(current, ChunkedMap) else ChunkedMap(current)).changing(expected)
        table = config.quotas.changing(expected)
        ip_rates = state.ip_rates.changing() if any(c.ip is not None for c in self.changes.values()) else None
        settings = None
        topics: dict[TableKey, QuotaEntry | None] = {}
        groups: dict[str, QuotaEntry | None] = {}
        for done, c in enumerate(self.changes.values(), 1):
            entries[c.canonical] = REMOVED if c.values is None else (c.entity, c.values)
            if c.quota_entity is not None:
                table.set(c.quota_entity, c.quota)
            elif c.topic is not None:
                topics[c.topic] = c.topic_quota
            elif c.group is not None:
                groups[c.group] = c.group_quota
            elif c.ip is not None and ip_rates is not None:  # not None: a change of an IP's rate is among these
                ip_rates[c.ip] = REMOVED if c.ip_rate is None else c.ip_rate
            elif c.settings is not None:
                settings = c.settings
            if done % step == 0:
                yield
        if not self.changes:
            self.result = state
            return
        from config.settings import connection_limits

        rates = state.ip_rates if ip_rates is None else ip_rates.done()
        connections = config.connections
        if settings is not None or ip_rates is not None:
            connections = connection_limits(settings or config.settings, base.listeners, rates)
        config = dataclasses.replace(
            config,
            quotas=table.done(),
            settings=settings or config.settings,
            connections=connections,
            topic_quotas=config.topic_quotas.with_changes(topics),
            group_quotas=config.group_quotas.with_changes(groups),
        )
        self.result = DynamicState(base, DynamicEntries(entries.done()), config, rates)

    def built(self) -> DynamicState:
        """:meth:`build` all at once (a small batch, or a test)."""
        for _ in self.build():
            pass
        assert self.result is not None
        return self.result
