"""File-descriptor headroom: client connections are refused before the proxy runs out of descriptors, so its own
work (the operations port, its Kafka clients, splice pipes, logs) and the connections it already serves never meet
``Too many open files`` (as Kafka's ``max.connections`` keeps a broker within its limits; here the bound follows
from the process's own ``RLIMIT_NOFILE``).

Each client connection takes two descriptors (its socket and its broker connection's); one accepted and not yet
served (held for its IP's rate, or being set up) is counted at one more. ``connections.reserved.file.descriptors``
are kept back from the soft limit (-1: a tenth of it, at least :data:`MIN_RESERVED`, at most half); a connection
that would eat into them is closed at once (``connections_closed`` reason :data:`FD_RESERVE`). With ``workers: N``
each worker has its own limit and its own count.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

FD_RESERVE = "fd_reserve"  # why the connection is closed (connections_closed's reason)
MIN_RESERVED = 256
AUTO = -1


def open_files_limit() -> int:
    """This process's soft RLIMIT_NOFILE (a very large number when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 2**31 - 1


def reserved(limit: int, setting: int) -> int:
    """The descriptors kept for the proxy itself out of ``limit``: the setting, or (-1) a tenth of the limit, at
    least MIN_RESERVED and at most half."""
    if setting != AUTO:
        return setting
    return min(max(limit // 10, MIN_RESERVED), limit // 2)


class DescriptorBudget:
    """The descriptors the client connections of this process may hold; shared by all its listeners."""

    __slots__ = ("limit", "reserved", "_connections", "waiting")

    def __init__(self, connections: set[Any], limit: int = 2**31 - 1, reserve: int = 0) -> None:
        self.limit = limit
        self.reserved = reserve
        self._connections = connections  # the open client connections (two descriptors each)
        self.waiting = 0  # accepted sockets not yet served or closed: held for a rate, or being set up

    @property
    def max_connections(self) -> int:
        """Client connections this process serves at most."""
        return max(0, (self.limit - self.reserved) // 2)

    def room(self) -> bool:
        """A connection just accepted may be served: its socket and its broker connection fit outside the reserve."""
        return 2 * len(self._connections) + self.waiting + 2 <= self.limit - self.reserved

    def track(self, task: asyncio.Future[Any]) -> None:
        """An accepted socket waits in ``task`` (held, or being set up): counted until the task ends."""
        self.waiting += 1
        task.add_done_callback(self._done)

    def _done(self, _task: asyncio.Future[Any]) -> None:
        self.waiting -= 1

    def detail(self) -> str:
        return (
            f"{len(self._connections)} client connections and {self.waiting} waiting would leave fewer than "
            f"{self.reserved} of the {self.limit} file descriptors (RLIMIT_NOFILE) for the proxy itself "
            f"(connections.reserved.file.descriptors)"
        )
