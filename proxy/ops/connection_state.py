"""What the proxy's open client connections are doing, read when Prometheus scrapes (in the scrape thread), never on
the request path: each connection's mute state by name (Kafka's ``KafkaChannel.ChannelMuteState``, the same name the
connection's log lines carry) and who is connected (the authenticated principal).

Nothing is counted as connections change: a scrape takes the set of open connections at once (one C-level copy, so
the event loop cannot change it half-way) and reads each connection's state. A connection the loop changes while it
is read is counted in the state it had at one moment or the other, as any gauge read between two events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from proxy.ops.metric_labels import label
from proxy.ops.metrics import PREFIX
from quota.primitives.top import OTHER

NOT_MUTED = "NOT_MUTED"


class ConnectionStateCollector(Collector):
    """``connections_mute_state`` (listener, state) and ``user_connections`` (listener, user; the busiest
    ``max_users`` users by connections, the rest summed under ``__other__``) over ``connections``, the proxy's set of
    open client connections, for ``listeners`` (each has a ``NOT_MUTED`` sample, 0 when idle)."""

    def __init__(self, connections: set, listeners: list[str], max_users: int) -> None:
        self._connections = connections
        self._listeners = listeners
        self._max_users = max_users

    def describe(self) -> list:
        return []  # collected on demand; nothing to register up front

    def collect(self) -> Iterator:
        states: dict[tuple[str, str], int] = defaultdict(int)
        for name in self._listeners:
            states[(name, NOT_MUTED)] = 0  # every listener has the sample, 0 while nothing is open
        users: dict[tuple[str, str], int] = defaultdict(int)
        for conn in tuple(self._connections):  # one copy: the loop may add and remove meanwhile
            listener = conn.ctx.name
            states[(listener, conn.flow.mute_state)] += 1
            users[(listener, conn.session.user)] += 1
        mute = GaugeMetricFamily(
            f"{PREFIX}_connections_mute_state",
            "Client connections open now, by mute state "
            "(Kafka's ChannelMuteState): NOT_MUTED, or MUTED_AND_ the reasons reading stops, "
            "as the connection's log lines name it.",
            labels=["listener", "state"],
        )
        for (listener, state), n in sorted(states.items()):
            mute.add_metric([listener, state], n)
        by_user = GaugeMetricFamily(
            f"{PREFIX}_user_connections",
            "Client connections open now, by listener and "
            "principal (the busiest users; the rest summed under __other__).",
            labels=["listener", "user"],
        )
        busiest = sorted(users.items(), key=lambda item: -item[1])
        kept = busiest if len(busiest) <= self._max_users else busiest[: self._max_users - 1]
        rest: dict[str, int] = defaultdict(int)
        for (listener, _), n in busiest[len(kept) :]:
            rest[listener] += n
        for (listener, user), n in kept:
            by_user.add_metric([listener, label(user)], n)
        for listener, n in sorted(rest.items()):
            by_user.add_metric([listener, OTHER], n)
        yield from (mute, by_user)
