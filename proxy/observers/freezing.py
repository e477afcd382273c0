"""Long-lived objects moved out of the cyclic garbage collector's sight, without pinning garbage with them; and
large tables freed a part at a time."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator


def freeze_long_lived() -> None:
    """A full collection, then ``gc.freeze()``.

    ``gc.freeze`` moves every object the collector tracks into a permanent generation it never walks again, garbage
    included: cyclic garbage alive at that moment (a closed connection's objects waiting for the next full collection,
    say) would never be freed, and the observers freeze again each time a thousand more entries or sensors are made,
    as often as a tenant rotating client ids makes them. Collected first, only what is alive is frozen. The collection
    walks only what was made since the last freeze, not the frozen bulk: about 50 us for 1000 sensors beside 3 x 10^5
    frozen objects on the 2-core machine, where the first full collection of those 3 x 10^5 took 73 ms."""
    gc.collect()
    gc.freeze()


def dispose(tables: dict, rows) -> None:
    """Free a sync's gathered tables and last leftover (a :class:`~quota.sharing.usage_gathered.Leftover`) a part at a time:
    freeing 10^5 entries at once is one call that holds the GIL for tens of milliseconds (in whichever thread drops
    the last reference)."""
    for column in rows.columns:
        while column:
            del column[-10_000:]
    for table in tables.values():
        for tags in list(table):
            del table[tags]


FREEZE_AFTER = 1000
"""Sensors a peer's record makes between two ``gc.freeze`` calls (see :func:`frozen_as_made`)."""


def frozen_as_made(steps: Iterator, sensors: Callable[[], int]) -> Iterator:
    """``steps`` (a peer's record recorded a step at a time), the objects alive moved out of the cyclic garbage
    collector's sight (:func:`freeze_long_lived`, as :mod:`proxy.observers.dynamic_config` does for quota entries)
    each time the managers hold FREEZE_AFTER more ``sensors`` than when it last looked: a record of tenants new to
    this proxy (a peer that appears, this proxy starting) makes up to 2 x 10^5 sensors at once, long-lived by design
    (an hour past their tenant's last record), and every full collection the recording set off walked all of them
    with the GIL held (a longest one of 2.4 s at 10^5 tenants). They are still freed, by reference counting, when
    they expire."""
    held = sensors()
    for done in steps:
        now_held = sensors()
        if now_held - held >= FREEZE_AFTER:
            freeze_long_lived()
            held = now_held
        held = min(held, now_held)
        yield done
