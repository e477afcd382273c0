"""An immutable mapping that a change copies only in part: the quota tables and dynamic entries of 10^6 entities.

A :class:`ChunkedMap` spreads its keys over up to :data:`MAX_CHUNKS` small dicts by hash. :meth:`ChunkedMap.updated`
gives a new map with some keys set or removed: only the chunks those keys fall in are copied (each about
:data:`TARGET_CHUNK` entries), the others are shared with the old map, which is unchanged. So a change of ``k`` keys
costs ``O(k)`` Python steps and at most ``k`` C-level chunk copies, whatever the size of the map, and a reader of the
old map (the request path, a scrape thread) never sees half of it: the new one is published by swapping one
reference.

A lookup is one hash and two index operations. Iteration goes chunk by chunk (no particular order). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any

TARGET_CHUNK = 256
"""Entries per chunk a new map aims at."""
MAX_CHUNKS = 4096
"""At 10^6 entries a chunk holds about 250: a one-key change copies that many pointers (a few microseconds)."""
REGROW = 4
"""A map grown past ``REGROW * TARGET_CHUNK`` entries per chunk is laid out again with more chunks (amortized
O(1) per key: the map has grown fourfold since it was last laid out)."""


class _Removed:
    __slots__ = ()

    def __repr__(self) -> str:
        return "REMOVED"


REMOVED: Any = _Removed()
"""The value that removes a key in :meth:`ChunkedMap.updated`."""


def _bits_for(size: int) -> int:
    bits = 0
    while (1 << bits) * TARGET_CHUNK < size and (1 << bits) < MAX_CHUNKS:
        bits += 1
    return bits


class ChunkedMap(Mapping[Any, Any]):
    __slots__ = ("_chunks", "_mask", "_len")

    def __init__(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        values = dict(items)
        self._layout(values, len(values))

    def _layout(self, values: Iterable[tuple[Any, Any]] | dict[Any, Any], size: int) -> None:
        mask = (1 << _bits_for(size)) - 1
        chunks: list[dict[Any, Any]] = [{} for _ in range(mask + 1)]
        for key, value in values.items() if isinstance(values, dict) else values:
            chunks[hash(key) & mask][key] = value
        self._chunks, self._mask, self._len = chunks, mask, sum(map(len, chunks))

    # -- reading ---------------------------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        return self._chunks[hash(key) & self._mask][key]

    def get(self, key: Any, default: Any = None) -> Any:
        return self._chunks[hash(key) & self._mask].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._chunks[hash(key) & self._mask]

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._chunks:
            yield from chunk

    def items(self) -> ItemsView[Any, Any]:
        return _Items(self)

    def values(self) -> ValuesView[Any]:
        return _Values(self)

    def __len__(self) -> int:
        return self._len

    @property
    def chunks_and_mask(self) -> tuple[list[dict[Any, Any]], int]:
        """For a caller that inlines :meth:`get` on a hot path: ``chunks[hash(key) & mask].get(key)``."""
        return self._chunks, self._mask

    def __repr__(self) -> str:
        return f"ChunkedMap({self._len} entries in {len(self._chunks)} chunks)"

    # -- changing (into a new map) ---------------------------------------------------------------------------------

    def updated(self, changes: Mapping[Any, Any]) -> ChunkedMap:
        """A new map: this one with each key of ``changes`` set to its value, or removed where the value is
        :data:`REMOVED`. This map is not changed; the new one shares every chunk no key of ``changes`` falls in."""
        if not changes:
            return self
        changing = self.changing()
        for key, value in changes.items():
            changing[key] = value
        return changing.done()

    def changing(self, expected: int = 0) -> Changing:
        """A private copy to change key by key (many changes, made in parts): each chunk is copied at most once,
        the first time a key falls in it; :meth:`Changing.done` gives the new map. ``expected``: how many keys may
        be added, so that a map about to grow is laid out for its new size now (linear in its current size) rather
        than all at once in ``done``."""
        return Changing(self, expected)

    def copied_from(self, old: ChunkedMap) -> int:
        """How many entries of this map lie in chunks it does not share with ``old`` (the work :meth:`updated`
        did to make it from ``old``; for tests and benchmarks)."""
        if len(self._chunks) != len(old._chunks):
            return self._len
        return sum(len(new) for new, was in zip(self._chunks, old._chunks) if new is not was)


class Changing:
    """The next :class:`ChunkedMap` being made from one (see :meth:`ChunkedMap.changing`); the old map is never
    changed. ``changing[key] = value`` sets a key (:data:`REMOVED` removes it); ``done()`` ends it."""

    __slots__ = ("_chunks", "_mask", "_size", "_owned", "copied")

    def __init__(self, base: ChunkedMap, expected: int = 0) -> None:
        self._chunks = list(base._chunks)  # a list of pointers (at most MAX_CHUNKS)
        self._mask, self._size = base._mask, base._len
        self._owned: set[int] = set()  # the chunks copied already: changed in place from then on
        self.copied = 0  # entries copied so far (the work; tests count it)
        if _bits_for(base._len + expected) > _bits_for(
            base._len
        ) and base._len + expected > REGROW * TARGET_CHUNK * len(self._chunks):
            bits = _bits_for(base._len + expected)
            self._mask = (1 << bits) - 1
            self._chunks = [{} for _ in range(self._mask + 1)]
            self._owned = set(range(self._mask + 1))
            for chunk in base._chunks:
                for key, value in chunk.items():
                    self._chunks[hash(key) & self._mask][key] = value
            self.copied = base._len

    def get(self, key: Any, default: Any = None) -> Any:
        return self._chunks[hash(key) & self._mask].get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        index = hash(key) & self._mask
        chunk = self._chunks[index]
        if index not in self._owned:
            chunk = self._chunks[index] = dict(chunk)
            self._owned.add(index)
            self.copied += len(chunk)
        if value is REMOVED:
            if chunk.pop(key, REMOVED) is not REMOVED:
                self._size -= 1
        else:
            if key not in chunk:
                self._size += 1
            chunk[key] = value

    def done(self) -> ChunkedMap:
        chunks, size = self._chunks, self._size
        self._chunks, self._owned = [], set()  # nothing more to change through this
        new = ChunkedMap.__new__(ChunkedMap)
        if size > REGROW * TARGET_CHUNK * len(chunks) and len(chunks) < MAX_CHUNKS:
            new._layout(((k, v) for chunk in chunks for k, v in chunk.items()), size)
        else:
            new._chunks, new._mask, new._len = chunks, self._mask, size
        return new


class _Items(ItemsView[Any, Any]):
    """The map's items, chunk by chunk (the view's lookups, ``in`` and the rest, are the ABC's)."""

    __slots__ = ()
    _mapping: ChunkedMap

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        for chunk in self._mapping._chunks:
            yield from chunk.items()


class _Values(ValuesView[Any]):
    """The map's values, chunk by chunk."""

    __slots__ = ()
    _mapping: ChunkedMap

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._mapping._chunks:
            yield from chunk.values()


EMPTY = ChunkedMap()
