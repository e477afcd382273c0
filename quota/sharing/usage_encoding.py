"""The encoding of a :class:`~quota.sharing.usage_delta.UsageDelta`, and its decoding, which checks every field: a
peer's bytes are input. Pure.

The encoding is transport-independent, so a Unix socket between workers and a Kafka record between sidecars carry
the same bytes: lines of compact JSON, a first with a version number and the small fields, then lines of
``[path, items]`` (at most :data:`LINE_ITEMS` each) for the long lists: each user and client id written once
(``users`` and ``clients``, sorted), each byte-rate, mutation or request-rate list as three columns (``produce.0``: the user
indices, ``.1``: the client indices, each as its difference from the row before; ``.2``: the values), rows ordered
by those indices, and ``producer_ids`` as ``[user index, count, ids]``; optionally
compressed with zlib (:func:`encode` ``compress``; :func:`decode` tells by the first byte). At 10^5 entities the
names are most of it: see ``bench/cluster_sync.py``. A malformed encoding raises :class:`UsageDeltaError` naming
the field.

Versions: 3 adds the topic quotas' usage (``topic_produce`` and ``topic_fetch``, issue 47). A delta without topic
usage is written as version 2, so a proxy of before (which reads version 2 only) still reads it; one with topic
usage is version 3, which such a proxy refuses whole with ``usage delta.v: expected 2, got 3`` (logged, counted in
``cluster_usage_records{direction="error"}``). Both are read here; in a version 2 delta a topic line is
malformed. Every delta says in its first line the newest version its sender reads (``reads``, which such a proxy
ignores), so that a sidecar sends topic usage only while all its peers read it
(:meth:`~quota.sharing.cluster_peers.ClusterPeers.all_read`). Version 4 adds the partition quotas' usage
(``partition_produce`` and ``partition_fetch``), the same way: a delta is written in the oldest version that holds
it, so topic usage alone stays version 3, read by the release before.
"""

from __future__ import annotations

import heapq
import json
import math
import zlib
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any, TypeVar

from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, ProducerIdUsage, Rows, UsageDelta, columns

VERSION = 4
TOPIC_VERSION = 3  # the first to carry the topic quotas' usage
OLDEST_VERSION = 2
"""Versions :func:`decode` reads; :func:`encode` writes the oldest that holds the delta."""
MAX_DECODED_BYTES = 64 * 2**20
"""A compressed delta that would inflate past this is refused (one sync's entities are far less)."""
LINE_ITEMS = 10_000
"""Items per line of the encoding: each line is one short call of the JSON codec, which holds the GIL throughout
(one call for 10^5 entities took 100-170 ms, a stall of the event loop even from another thread)."""
ZLIB_LEVEL = 1
"""zlib's fastest level: at 10^5 entities levels 6-9 save a fifth of the bytes for several times the time."""
_ENTITY_KINDS = (
    "produce",
    "fetch",
    "mutations",
    "requests",
    "topic_produce",
    "topic_fetch",
    "partition_produce",
    "partition_fetch",
)
_KINDS_OF = {OLDEST_VERSION: _ENTITY_KINDS[:4], TOPIC_VERSION: _ENTITY_KINDS[:6], VERSION: _ENTITY_KINDS}
"""The per-entity lists each version carries."""
T = TypeVar("T")


class UsageDeltaError(ValueError):
    """A usage delta that cannot be decoded; the message names the field."""


def encode(delta: UsageDelta, *, compress: bool = False) -> bytes:
    """The delta's bytes; ``compress``: zlib-compressed (what a sidecar publishes: a record has a size limit)."""
    entity_kinds = [columns(getattr(delta, kind)) for kind in _ENTITY_KINDS]
    names: set[str] = set(map(itemgetter(0), delta.producer_ids))
    client_names: set[str] = set()
    for row_users, row_clients, _ in entity_kinds:
        for part in _parts(row_users):
            names.update(part)
        for part in _parts(row_clients):
            client_names.update(part)
    user_list, client_list = _sorted(names), _sorted(client_names)  # neighbours share most of their name: compresses
    users: dict[str, int] = {}
    for at, part in enumerate(_parts(user_list)):
        users.update(zip(part, range(at * LINE_ITEMS, at * LINE_ITEMS + len(part))))
    clients = dict(zip(client_list, range(len(client_list))))
    head = {
        "v": written_version(delta),
        "reads": VERSION,  # what this sender reads (an earlier release ignores the key)
        "source": delta.source,
        "scope": delta.scope,
        "listeners": delta.listeners,
        "ips": delta.ips,
        "open": delta.open_connections,
    }
    if delta.seq:
        head.update(inc=delta.incarnation, seq=delta.seq)
    lines = [json.dumps(head, separators=(",", ":"), allow_nan=False)]
    _lines(lines, "users", user_list)
    _lines(lines, "clients", client_list)
    width = len(clients)
    for kind, (row_users, row_clients, values) in zip(_ENTITY_KINDS, entity_kinds):
        if values:
            keys = [users[user] * width + clients[client_id] for user, client_id in zip(row_users, row_clients)]
            order = sorted(range(len(keys)), key=keys.__getitem__)  # rows by index: small steps from one to the next
            us, cs = [keys[i] // width for i in order], [keys[i] % width for i in order]
            _lines(lines, f"{kind}.0", [b - a for a, b in zip(chain((0,), us), us)])
            _lines(lines, f"{kind}.1", [b - a for a, b in zip(chain((0,), cs), cs)])
            _lines(lines, f"{kind}.2", [values[i] for i in order])
    _lines(lines, "producer_ids", [(users[user], count, ids) for user, count, ids in delta.producer_ids])
    data = "\n".join(lines).encode()
    return zlib.compress(data, ZLIB_LEVEL) if compress else data


def written_version(delta: UsageDelta) -> int:
    """The oldest version that holds ``delta``: what the most releases read."""
    if delta.partition_produce or delta.partition_fetch:
        return VERSION
    return TOPIC_VERSION if delta.topic_produce or delta.topic_fetch else OLDEST_VERSION


def _sorted(names: set[str]) -> list[str]:
    """``sorted(names)`` in short calls: a part at a time, then merged (one sort of 10^5 names held the GIL 50 ms)."""
    if len(names) <= LINE_ITEMS:
        return sorted(names)
    listed = list(names)
    return list(heapq.merge(*(sorted(part) for part in _parts(listed))))


def _parts(items: Sequence[T]) -> Iterator[Sequence[T]]:
    return (items[at : at + LINE_ITEMS] for at in range(0, len(items), LINE_ITEMS))


def _lines(lines: list[str], path: str, items: Sequence[Any]) -> None:
    """``items`` as lines of ``[path, part]``, :data:`LINE_ITEMS` to a line."""
    for part in _parts(items):
        lines.append(json.dumps([path, part], separators=(",", ":"), allow_nan=False))


_PATHS = {
    version: {"users", "clients", "producer_ids"} | {f"{kind}.{column}" for kind in kinds for column in range(3)}
    for version, kinds in _KINDS_OF.items()
}


def decode(data: bytes) -> UsageDelta:
    if data[:1] == b"\x78":  # zlib's header (JSON starts with "{")
        data = _inflate(data)
    lines = data.split(b"\n")
    try:
        raw = json.loads(lines[0])
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageDeltaError(f"usage delta: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageDeltaError(f"usage delta: expected an object, got {type(raw).__name__}")
    version = raw.get("v")
    if isinstance(version, bool) or not isinstance(version, int) or version not in _PATHS:
        raise UsageDeltaError(f"usage delta.v: expected {OLDEST_VERSION} to {VERSION}, got {version!r}")
    paths = _PATHS[version]
    for i, line in enumerate(lines[1:], 1):
        try:
            item = json.loads(line)
        except (UnicodeDecodeError, ValueError) as exc:
            raise UsageDeltaError(f"usage delta: line {i} not JSON: {exc}") from None
        if not (isinstance(item, list) and len(item) == 2 and item[0] in paths and isinstance(item[1], list)):
            raise UsageDeltaError(
                f"usage delta (v{raw['v']}): line {i}: expected [one of {sorted(paths)}, a list], got {line[:80]!r}"
            )
        path, part = item
        if path[-2:-1] == ".":
            columns = raw.setdefault(path[:-2], [[], [], []])
            columns[int(path[-1])].extend(part)
        else:
            raw.setdefault(path, []).extend(part)
    source = raw.get("source")
    if not isinstance(source, str):
        raise UsageDeltaError(f"usage delta.source: expected a string, got {source!r}")
    scope = raw.get("scope", "")
    if not isinstance(scope, str):
        raise UsageDeltaError(f"usage delta.scope: expected a string, got {scope!r}")
    incarnation = _string(raw.get("inc", ""), "inc")
    seq = _integer(raw.get("seq", 0), "seq")
    reads = _count(raw.get("reads", 0), "reads")
    if seq < 0:
        raise UsageDeltaError(f"usage delta.seq: expected a number from 0, got {seq}")
    users, clients = _strings(raw, "users"), _strings(raw, "clients")
    return UsageDelta(
        source=source,
        scope=scope,
        produce=_entities(raw, "produce", users, clients, signed=False),
        fetch=_entities(raw, "fetch", users, clients, signed=False),
        mutations=_entities(raw, "mutations", users, clients, signed=True),  # net of KIP-599 refunds: may be < 0
        requests=_entities(raw, "requests", users, clients, signed=False),
        topic_produce=_topics(raw, "topic_produce", users, clients) if version >= TOPIC_VERSION else (),
        topic_fetch=_topics(raw, "topic_fetch", users, clients) if version >= TOPIC_VERSION else (),
        partition_produce=_partitions(raw, "partition_produce", users, clients) if version >= VERSION else (),
        partition_fetch=_partitions(raw, "partition_fetch", users, clients) if version >= VERSION else (),
        producer_ids=_producer_ids(raw, users),
        listeners=_counts(raw, "listeners"),
        ips=_counts(raw, "ips"),
        open_connections=tuple(
            (_string(kind, f"open[{i}][0]"), _string(key, f"open[{i}][1]"), _count(n, f"open[{i}][2]"))
            for i, (kind, key, n) in enumerate(_items(raw, "open", 3))
        ),
        incarnation=incarnation,
        seq=seq,
        reads=reads,
    )


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_DECODED_BYTES)
    except zlib.error as exc:
        raise UsageDeltaError(f"usage delta: not zlib: {exc}") from None
    if inflater.unconsumed_tail:
        raise UsageDeltaError(f"usage delta: more than {MAX_DECODED_BYTES} bytes once inflated")
    if not inflater.eof:
        raise UsageDeltaError("usage delta: zlib stream cut short")
    return out


def _items(raw: dict[str, Any], name: str, width: int) -> list[Any]:
    items = raw.get(name, [])
    if not isinstance(items, list):
        raise UsageDeltaError(f"usage delta.{name}: expected a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, list) or len(item) != width:
            raise UsageDeltaError(f"usage delta.{name}[{i}]: expected a list of {width}, got {item!r}")
    return items


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageDeltaError(f"usage delta.{where}: expected a finite number, got {value!r}")
    return value


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise UsageDeltaError(f"usage delta.{where}: expected a string, got {value!r}")
    return value


def _integer(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageDeltaError(f"usage delta.{where}: expected an integer, got {value!r}")
    return value


def _strings(raw: dict[str, Any], name: str) -> list[str]:
    items = raw.get(name, [])
    if not isinstance(items, list):
        raise UsageDeltaError(f"usage delta.{name}: expected a list, got {type(items).__name__}")
    if not all(type(item) is str for item in items):  # the fast check; the slow one names the first bad item
        for i, item in enumerate(items):
            _string(item, f"{name}[{i}]")
    return items


def _entities(raw: dict[str, Any], name: str, users: list[str], clients: list[str], signed: bool) -> Rows | tuple[()]:
    """``[user index steps, client index steps, values]`` back into ``(user, client_id, value)`` rows, as columns
    (:class:`Rows`). Checked a column at a time (10^5 rows in milliseconds); a bad item is then looked for one by one,
    to name it. Unless ``signed``, a value below 0 is malformed: bytes are never given back (issue 44, T8: a
    record written straight to the topic with a negative usage let a tenant reach 5 x its quota)."""
    columns = raw.get(name)
    if columns is None:
        return ()
    if not isinstance(columns, list) or len(columns) != 3 or not all(isinstance(c, list) for c in columns):
        raise UsageDeltaError(f"usage delta.{name}: expected three lists, got {columns!r:.80}")
    du, dc, values = columns
    if not len(du) == len(dc) == len(values):
        raise UsageDeltaError(f"usage delta.{name}: columns of {len(du)}, {len(dc)} and {len(values)} items")
    indices = []
    for col, steps, table, what in ((0, du, users, "users"), (1, dc, clients, "clients")):
        if not all(type(step) is int for step in steps):
            for i, step in enumerate(steps):
                _integer(step, f"{name}[{col}][{i}]")
        at = list(accumulate(steps))
        if at and (min(at) < 0 or max(at) >= len(table)):
            i = next(i for i, index in enumerate(at) if not 0 <= index < len(table))
            raise UsageDeltaError(f"usage delta.{name}[{col}][{i}]: index {at[i]} outside the {len(table)} {what}")
        indices.append(list(map(table.__getitem__, at)))
    try:
        finite = all(type(v) in (int, float) and math.isfinite(v) for v in values)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        for i, value in enumerate(values):
            try:
                _number(value, f"{name}[2][{i}]")
            except OverflowError:
                raise UsageDeltaError(
                    f"usage delta.{name}[2][{i}]: expected a finite number, got {value!r:.40}"
                ) from None
    if not signed and values and min(values) < 0:
        i = next(i for i, value in enumerate(values) if value < 0)
        raise UsageDeltaError(f"usage delta.{name}[2][{i}]: expected a usage from 0, got {values[i]!r}")
    return Rows(indices[0], indices[1], values)


def _topics(raw: dict[str, Any], name: str, users: list[str], clients: list[str]) -> Rows | tuple[()]:
    """A topic list: as :func:`_entities`, each row a topic (its client id) of no user."""
    rows = _entities(raw, name, users, clients, signed=False)
    if isinstance(rows, Rows) and any(rows.users):
        i = next(i for i, user in enumerate(rows.users) if user)
        raise UsageDeltaError(f"usage delta.{name}[0][{i}]: a topic's usage names no user, got {rows[i][0]!r}")
    return rows


def _partitions(raw: dict[str, Any], name: str, users: list[str], clients: list[str]) -> Rows | tuple[()]:
    """A partition list: as :func:`_entities`, each row a partition of a topic (its user): the topic named."""
    rows = _entities(raw, name, users, clients, signed=False)
    if isinstance(rows, Rows) and not all(rows.users):
        i = next(i for i, user in enumerate(rows.users) if not user)
        raise UsageDeltaError(f"usage delta.{name}[0][{i}]: a partition's usage names its topic, got none")
    return rows


def _count(value: object, where: str) -> int:
    """An integer from 0: a count (connections, new producer ids) is never negative."""
    n = _integer(value, where)
    if n < 0:
        raise UsageDeltaError(f"usage delta.{where}: expected a count from 0, got {n}")
    return n


def _counts(raw: dict[str, Any], name: str) -> tuple[tuple[str, int], ...]:
    return tuple(
        (_string(k, f"{name}[{i}][0]"), _count(n, f"{name}[{i}][1]")) for i, (k, n) in enumerate(_items(raw, name, 2))
    )


def _producer_ids(raw: dict[str, Any], users: list[str]) -> tuple[ProducerIdUsage, ...]:
    out = []
    for i, (user, count, pids) in enumerate(_items(raw, "producer_ids", 3)):
        where = f"producer_ids[{i}]"
        if not isinstance(pids, list) or len(pids) > MAX_PRODUCER_IDS_PER_USER:
            raise UsageDeltaError(
                f"usage delta.{where}[2]: expected a list of at most {MAX_PRODUCER_IDS_PER_USER} "
                f"ids, got {type(pids).__name__} of {len(pids) if isinstance(pids, list) else '?'}"
            )
        ids = tuple(_integer(pid, f"{where}[2]") for pid in pids)
        u = _integer(user, f"{where}[0]")
        if not 0 <= u < len(users):
            raise UsageDeltaError(f"usage delta.{where}[0]: index {u} outside the {len(users)} users")
        out.append((users[u], _integer(count, f"{where}[1]"), ids))  # < 0: a held id given back on every peer
    return tuple(out)
