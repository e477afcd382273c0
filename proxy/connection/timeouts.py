"""A connection's timeouts as a deadline of its flow (:class:`proxy.connection.flow.Flow`): pure, time passed in (ns).

Three bounds, as Kafka's: a client that sends nothing and is owed nothing for ``connections.max.idle.ms``
(``idle``), a client that takes no response for as long (``client_full``), and a broker that does not answer a request
within ``upstream.response.timeout.ms`` (``upstream_timeout``; time the proxy kept the broker unread does not count).
They are not swept: :attr:`Timeouts.check_at` is the earliest time any of them could be past given what is known
now, and the connection's one timer brings the check then (:meth:`Timeouts.check`), which sets the next one.
"""

from __future__ import annotations

# A check that finds a bound past its time yet not closing (an idle deadline passed while a request was waiting)
# looks again this much later: the one case with no exact deadline (the old sweep's period).
TIMEOUT_RECHECK_NS = 1_000_000_000


class Timeouts:
    __slots__ = ("response_timeout", "idle_timeout", "check_at", "last_read", "full_since", "broker_resumed")

    def __init__(self, response_timeout: int = 0, idle_timeout: int = 0) -> None:
        if (response_timeout or idle_timeout) and not (response_timeout > 0 and idle_timeout > 0):
            raise ValueError(f"timeouts must both be positive, got {response_timeout} and {idle_timeout} ns")
        self.response_timeout = response_timeout  # ns (0: no timeouts checked)
        self.idle_timeout = idle_timeout
        self.check_at = 0  # when the timeouts are checked next (ns; 0: never, see start)
        self.last_read = 0  # when the client last sent bytes (ns)
        self.full_since = 0  # when the client stopped taking responses (ns), 0 while it takes them
        self.broker_resumed = 0  # when reading the broker last resumed (ns): the response timeout starts anew

    def start(self, now: int) -> None:
        """The connection starts (its first read counts from ``now``): the timeouts are checked from here on."""
        self.last_read = now
        if self.response_timeout:
            self.check_at = now + min(self.response_timeout, self.idle_timeout)

    def due(self, now: int) -> bool:
        return 0 < self.check_at <= now

    def check(self, now: int, waiting_since: int | None, reading_broker: bool) -> str | None:
        """The check time has come: the bound past (:meth:`overdue`), or None and the next check set to the
        earliest time one could be: a bound's own deadline, or, for one that starts only later (a request read, the
        client full, reading the broker resumed), no earlier than now plus the shorter timeout. Past a bound, no
        further check: the connection closes. Only with timeouts configured."""
        rt, idle = self.response_timeout, self.idle_timeout
        past = self.overdue(now, waiting_since, reading_broker, rt, idle)
        if past is not None:
            self.check_at = 0
            return past
        at = now + min(rt, idle)
        candidates = [self.last_read + idle + 1]  # the first time each bound is past (overdue: strictly more)
        if self.full_since:
            candidates.append(self.full_since + idle + 1)
        if waiting_since is not None and reading_broker:
            candidates.append(max(waiting_since, self.broker_resumed) + rt + 1)
        for candidate in candidates:
            at = min(at, candidate if candidate > now else now + TIMEOUT_RECHECK_NS)
        self.check_at = at
        return None

    def overdue(
        self, now: int, waiting_since: int | None, reading_broker: bool, response_timeout: int, idle_timeout: int
    ) -> str | None:
        """The bound past, or None: ``"client_full"`` (the client took no response for ``idle_timeout``),
        ``"upstream_timeout"`` (the broker did not answer a request read at ``waiting_since`` within
        ``response_timeout``, counted while the broker is read), ``"idle"`` (nothing sent nor owed)."""
        if self.full_since and now - self.full_since > idle_timeout:
            return "client_full"
        if waiting_since is not None:
            if reading_broker and now - max(waiting_since, self.broker_resumed) > response_timeout:
                return "upstream_timeout"
            return None
        if now - self.last_read > idle_timeout:
            return "idle"
        return None
