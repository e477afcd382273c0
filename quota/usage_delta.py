"""What one proxy process saw of quota usage since its last sync, as a plain value, and its encoding. Pure.

Several processes enforcing one quota state (``workers: N`` today; sidecars sharing a usage topic in issue 26) each
keep their own quota managers and send the others, every sync, the usage they recorded themselves since the last
one. A receiver records it as *remote usage* (:mod:`quota.usage_share`): counted in its sensors and buckets, so its
own clients' next decisions see the total, but never throttling anyone by itself.

A :class:`UsageDelta` holds, for the entities with usage since the last sync only (so its size is bounded by the
traffic of one sync interval, not by the number of entities known):

* ``produce`` / ``fetch``: ``(user, client_id, bytes)`` per byte-rate sensor (one client that resolves to the
  sensor's tags stands for it; the receiver resolves it against its own table). Net of what was unrecorded.
* ``mutations``: ``(user, client_id, tokens)``, the controller-mutation tokens taken less those refunded (negative
  when more was refunded than taken).
* ``producer_ids``: ``(user, new ids counted, ids)``: the tokens taken for new producer ids, and the ids themselves
  (at most :data:`MAX_PRODUCER_IDS_PER_USER` of them, so that peers' caches know them and do not count them again).
* ``scope``: the quota set the byte rates and producer ids were counted in: ``""`` for the proxy's own, a broker's
  node id for that broker's budget under ``quota.scope: broker`` in cluster mode, ``volume`` for the volume
  throttle's scaled ``producer_byte_rate`` (mutations and connections are always the proxy's own, in the ``""``
  delta).
* ``listeners`` / ``ips``: connections accepted per listener (net of those un-recorded for their IP's rate) and
  connections counted per IP (KIP-612's rates).
* ``open_connections``: ``(kind, key, n)``, the sender's open connections now, in all (``total``), per
  ``listener`` and per ``ip``, for the counts that changed since its last sync (KIP-402's limits; absolute, not
  deltas, so a receiver that forgets a sender loses nothing else).

The encoding is transport-independent: compact JSON of the fields above with a version number, so a Unix socket
between workers and a Kafka record between sidecars carry the same bytes. A malformed encoding raises
:class:`UsageDeltaError` naming the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

VERSION = 1
MAX_PRODUCER_IDS_PER_USER = 4096
"""Producer ids sent per user per sync; past that only their count is (peers take the tokens, not the ids)."""

EntityUsage = tuple[str, str, float]  # (user, client_id, value)
ProducerIdUsage = tuple[str, int, tuple[int, ...]]  # (user, new ids counted, the ids)


class UsageDeltaError(ValueError):
    """A usage delta that cannot be decoded; the message names the field."""


@dataclass(frozen=True, slots=True)
class UsageDelta:
    source: str  # who recorded it (a worker index, a sidecar id): receivers skip their own
    scope: str = ""  # whose budget: "" the proxy's own quota set, else a broker's node id (quota.scope broker)
    produce: tuple[EntityUsage, ...] = ()
    fetch: tuple[EntityUsage, ...] = ()
    mutations: tuple[EntityUsage, ...] = ()
    producer_ids: tuple[ProducerIdUsage, ...] = ()
    listeners: tuple[tuple[str, int], ...] = ()
    ips: tuple[tuple[str, int], ...] = ()
    open_connections: tuple[tuple[str, str, int], ...] = ()  # absolute counts that changed (quota.peer_connections)

    @property
    def empty(self) -> bool:
        return not (self.produce or self.fetch or self.mutations or self.producer_ids or self.listeners or self.ips
                    or self.open_connections)

    @property
    def entities(self) -> int:
        """How many entries it carries (what its size grows with)."""
        return (len(self.produce) + len(self.fetch) + len(self.mutations) + len(self.producer_ids)
                + len(self.listeners) + len(self.ips) + len(self.open_connections))


def encode(delta: UsageDelta) -> bytes:
    return json.dumps({
        "v": VERSION, "source": delta.source, "scope": delta.scope, "produce": delta.produce, "fetch": delta.fetch,
        "mutations": delta.mutations, "producer_ids": delta.producer_ids, "listeners": delta.listeners,
        "ips": delta.ips, "open": delta.open_connections,
    }, separators=(",", ":"), allow_nan=False).encode()


def decode(data: bytes) -> UsageDelta:
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageDeltaError(f"usage delta: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageDeltaError(f"usage delta: expected an object, got {type(raw).__name__}")
    if raw.get("v") != VERSION:
        raise UsageDeltaError(f"usage delta.v: expected {VERSION}, got {raw.get('v')!r}")
    source = raw.get("source")
    if not isinstance(source, str):
        raise UsageDeltaError(f"usage delta.source: expected a string, got {source!r}")
    scope = raw.get("scope", "")
    if not isinstance(scope, str):
        raise UsageDeltaError(f"usage delta.scope: expected a string, got {scope!r}")
    return UsageDelta(
        source=source,
        scope=scope,
        produce=_entities(raw, "produce"),
        fetch=_entities(raw, "fetch"),
        mutations=_entities(raw, "mutations"),
        producer_ids=_producer_ids(raw),
        listeners=_counts(raw, "listeners"),
        ips=_counts(raw, "ips"),
        open_connections=tuple((_string(kind, f"open[{i}][0]"), _string(key, f"open[{i}][1]"),
                                _integer(n, f"open[{i}][2]")) for i, (kind, key, n) in enumerate(_items(raw, "open", 3))),
    )


def _items(raw: dict, name: str, width: int) -> list:
    items = raw.get(name, [])
    if not isinstance(items, list):
        raise UsageDeltaError(f"usage delta.{name}: expected a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, list) or len(item) != width:
            raise UsageDeltaError(f"usage delta.{name}[{i}]: expected a list of {width}, got {item!r}")
    return items


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageDeltaError(f"usage delta.{where}: expected a finite number, got {value!r}")
    return value


def _string(value, where: str) -> str:
    if not isinstance(value, str):
        raise UsageDeltaError(f"usage delta.{where}: expected a string, got {value!r}")
    return value


def _integer(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageDeltaError(f"usage delta.{where}: expected an integer, got {value!r}")
    return value


def _entities(raw: dict, name: str) -> tuple[EntityUsage, ...]:
    return tuple((_string(u, f"{name}[{i}][0]"), _string(c, f"{name}[{i}][1]"), _number(v, f"{name}[{i}][2]"))
                 for i, (u, c, v) in enumerate(_items(raw, name, 3)))


def _counts(raw: dict, name: str) -> tuple[tuple[str, int], ...]:
    return tuple((_string(k, f"{name}[{i}][0]"), _integer(n, f"{name}[{i}][1]"))
                 for i, (k, n) in enumerate(_items(raw, name, 2)))


def _producer_ids(raw: dict) -> tuple[ProducerIdUsage, ...]:
    out = []
    for i, (user, count, pids) in enumerate(_items(raw, "producer_ids", 3)):
        where = f"producer_ids[{i}]"
        if not isinstance(pids, list) or len(pids) > MAX_PRODUCER_IDS_PER_USER:
            raise UsageDeltaError(f"usage delta.{where}[2]: expected a list of at most {MAX_PRODUCER_IDS_PER_USER} "
                                  f"ids, got {type(pids).__name__} of {len(pids) if isinstance(pids, list) else '?'}")
        ids = tuple(_integer(pid, f"{where}[2]") for pid in pids)
        out.append((_string(user, f"{where}[0]"), _integer(count, f"{where}[1]"), ids))
    return tuple(out)
