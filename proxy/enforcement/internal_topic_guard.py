"""Who may write the proxy's internal topics (dynamic config, volume usage): admin principals and the proxy's own
connections; every refusal is counted and logged, rate-limited per peer. The handler that applies it to each
request is :mod:`proxy.apis.internal_topics`."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from proxy.cluster.own_clients import OwnConnections
from proxy.codec.apis import api_name
from proxy.ground.logs import LogLimiter
from proxy.session.session import Session

log = logging.getLogger(__name__)


class InternalTopicGuard:
    """Who may write the internal topics, and the count of refusals. ``topics`` empty: nothing to guard."""

    # read per Produce by the connection extension's reuse key (a slot, cached per call site); the rest in the dict
    __slots__ = ("topics", "__dict__")

    def __init__(
        self,
        topics: Iterable[str] = (),
        admin_principals: Iterable[str] = (),
        own: OwnConnections | None = None,
        refused_counter=None,
    ) -> None:
        self.topics = frozenset(topics)
        self.admins = frozenset(admin_principals)
        self.own = own or OwnConnections()
        self._counter = refused_counter  # prometheus Counter with labels (topic, api), or None
        self.refused_total: dict[tuple[str, str], int] = {}
        self._log = LogLimiter()

    def allowed(self, session: Session) -> bool:
        """An admin (principal or admin listener), or the proxy's own connection (checked once per connection)."""
        if session.is_admin(self.admins):
            return True
        if session.own_connection is None:
            session.own_connection = self.own.is_own(session.peer, session.local)
        return session.own_connection

    def refused(self, session: Session, api_key: int, topics: Iterable[str]) -> None:
        api = api_name(api_key)
        for topic in topics:
            key = (topic, api)
            self.refused_total[key] = self.refused_total.get(key, 0) + 1
            if self._counter is not None:
                self._counter.labels(topic, api).inc()
            suppressed = self._log.allow(session.peer_ip, f"{api}:{topic}", time.monotonic())
            if suppressed is not None:
                log.warning(
                    "refused %s of internal topic %s from User:%s at %s (not in admin_principals)%s",
                    api,
                    topic,
                    session.user,
                    session.peer_ip,
                    f"; {suppressed} more from this peer in the last 10 s" if suppressed else "",
                )


NO_GUARD = InternalTopicGuard()
