"""Bounded views of many entities, for metrics: the busiest few by a value, and the rest to be summed as one.

Metrics are scraped in a thread other than the one that records (the proxy's event loop), so the managers'
tables are read here without taking part in their updates:

* :func:`snapshot` copies a table's values in one C-level step (``list(dict.values(d))``): no Python code runs
  during it, so the GIL is not released and the owner cannot change the table half-way through. It is retried
  should a change ever slip in (``RuntimeError``), so a scrape never fails for it.
* The objects themselves are then read field by field: each read is atomic; fields of one object read while its
  owner updates it may come from either side of the update, which a metric can live with.
* The work goes in chunks of :data:`CHUNK` entities, with the caller's ``pause`` between two chunks: the scrape
  thread gives the GIL back there, so the event loop never waits long for it (a C-level loop such as ``sum`` over
  10^6 entities would hold it for tens of milliseconds).

Pure: no clock, no I/O, no threads of its own.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")

OTHER = "__other__"
"""The label value under which the entities past the top N are summed."""

CHUNK = 4096
"""Entities handled between two pauses (about a millisecond of work)."""


def no_pause() -> None:
    pass


def snapshot(table: Mapping[Any, T]) -> list[T]:
    """The values of ``table`` (a dict or OrderedDict another thread may be changing), copied at once."""
    while True:
        try:
            return list(dict.values(table))  # type: ignore[arg-type]  # a dict's own iterator, on purpose: no per-key lookup, no Python code
        except RuntimeError:  # changed during the copy: take it again
            continue


def chunks(items: Sequence[T], pause: Callable[[], None] = no_pause) -> Iterator[Sequence[T]]:
    """``items`` in slices of :data:`CHUNK`, calling ``pause`` between two of them."""
    for start in range(0, len(items), CHUNK):
        if start:
            pause()
        yield items[start : start + CHUNK]


def busiest(items: list[T], n: int, key: Callable[[T], float], pause: Callable[[], None] = no_pause) -> list[T] | None:
    """At most ``n`` groups: None when there are ``n`` or fewer items (each is its own), else the ``n - 1`` with the
    largest ``key`` (the others to be summed as one, see :func:`others`). One pass, in chunks."""
    if len(items) <= n:
        return None
    top: list[T] = []
    for part in chunks(items, pause):
        top = heapq.nlargest(n - 1, chain(top, part), key=key)
    return top


def others(items: Sequence[T], top: Sequence[T], pause: Callable[[], None] = no_pause) -> Iterator[list[T]]:
    """The items not in ``top``, a chunk at a time (no list of them all: freeing one holds the GIL too)."""
    kept = set(map(id, top))
    for part in chunks(items, pause):
        yield [item for item in part if id(item) not in kept]


def totals(parts: Iterable[list[Any]], names: tuple[str, ...]) -> dict[str, float]:
    """The sum of each attribute of ``names`` over the items of ``parts``."""
    sums: dict[str, float] = dict.fromkeys(names, 0)
    getters = [(name, attrgetter(name)) for name in names]
    for part in parts:
        for name, get in getters:
            sums[name] += sum(map(get, part))
    return sums


def release(items: list[Any], pause: Callable[[], None] = no_pause) -> None:
    """Empties a big snapshot from its end, a chunk at a time: dropping 10^6 references in one go is a C loop that
    holds the GIL for about 20 ms."""
    while items:
        del items[-CHUNK:]
        if items:
            pause()
