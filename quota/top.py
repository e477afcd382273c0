"""Bounded views of many entities, for metrics: the busiest few by a value, and the rest to be summed as one.

Metrics are scraped in a thread other than the one that records (the proxy's event loop), so the managers'
tables are read here without taking part in their updates:

* :func:`snapshot` copies a table's values in one C-level step (``list(dict.values(d))``): no Python code runs
  during it, so the GIL is not released and the owner cannot change the table half-way through. It is retried
  should a change ever slip in (``RuntimeError``), so a scrape never fails for it.
* The objects themselves are then read field by field: each read is atomic; fields of one object read while its
  owner updates it may come from either side of the update, which a metric can live with.

Pure: no clock, no I/O, no threads of its own.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

OTHER = "__other__"
"""The label value under which the entities past the top N are summed."""


def snapshot(table: Mapping) -> list:
    """The values of ``table`` (a dict or OrderedDict another thread may be changing), copied at once."""
    while True:
        try:
            return list(dict.values(table))  # dict's own iterator: no per-key lookup, no Python code
        except RuntimeError:  # changed during the copy: take it again
            continue


def top_and_rest(items: list[T], n: int, key: Callable[[T], float]) -> tuple[list[T], list[T]]:
    """At most ``n`` groups: every item when there are ``n`` or fewer, else the ``n - 1`` with the largest ``key``
    and the rest (to be summed as one). Cost: one pass over ``items`` plus a heap of ``n``."""
    if len(items) <= n:
        return items, []
    top = heapq.nlargest(max(n - 1, 0), items, key=key)
    kept = set(map(id, top))
    return top, [item for item in items if id(item) not in kept]
