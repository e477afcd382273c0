"""Where a quota manager also tells the usage it records, for sharing with peers (:mod:`quota.sharing.usage_share`):
:data:`NO_TAP` while nothing is shared, so a single process pays one no-op call per record. Its own module so that
the managers (and the primitives they are built of) need not import the sharing code, which imports them."""

from __future__ import annotations

import math
from collections.abc import Iterable

from quota.primitives.entity import QuotaTags
from quota.primitives.peer_connections import OpenCount


class NoTap:
    """Usage not shared: every call does nothing."""

    __slots__ = ()

    def add(
        self, quota_key: str, tags: QuotaTags, user: str, client_id: str, value: float, limit: float = math.inf
    ) -> None:
        pass

    def producer_id(self, user: str, pid: int) -> None:
        """A new ``pid`` counted (its token taken) and let through: known."""

    def producer_id_held(self, user: str) -> None:
        """A new id counted (its token taken) and held: not known until :meth:`producer_id_admitted`."""

    def producer_id_admitted(self, user: str, pid: int) -> None:
        """A held ``pid`` reached the broker: known from now (its token was told when it was held)."""

    def producer_id_released(self, user: str, pid: int) -> None:
        pass

    def listener(self, listener: str, n: int) -> None:
        pass

    def ip(self, ip: str, n: int) -> None:
        pass

    def open(self, counts: Iterable[OpenCount]) -> None:
        pass


NO_TAP = NoTap()
