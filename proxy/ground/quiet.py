"""Pausing the cyclic garbage collector and shortening the switch interval around work off the event loop."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SCRAPE_SWITCH_INTERVAL_S = 0.001


_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_saved: tuple[bool, float] = (True, 0.005)


@contextmanager
def quiet() -> Iterator[None]:
    """Around work that walks the quota tables off the loop (a scrape, a background build of the per-entity series),
    so that the event loop waits little for the GIL meanwhile:

    * the interpreter's switch interval is 1 ms (not 5): the loop, when it wants the GIL back from the scrape
      thread, waits at most that long between two bytecodes; a request crossing the proxy takes the GIL several
      times (worst bystander wait at 10^6 tenants 39-56 ms with 5 ms, 25 ms with 1 ms);
    * the cyclic garbage collector is paused: the quota collectors hold a snapshot of up to millions of sensors,
      and a collection of the young generation while it is young walks every entry with the GIL held (about 25 ms
      per million).

    Both are process-wide: the first of overlapping users (the scrape thread and the series builder) sets them,
    the last restores them."""
    global _quiet_depth, _quiet_saved
    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_saved = (gc.isenabled(), sys.getswitchinterval())
            gc.disable()
            sys.setswitchinterval(min(_quiet_saved[1], SCRAPE_SWITCH_INTERVAL_S))
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                enabled, interval = _quiet_saved
                sys.setswitchinterval(interval)
                if enabled:
                    gc.enable()
