"""One connection core whose client, broker and metrics are logs, for tests that compare two connections call by
call (a reusing planner beside an always-asking one)."""

from __future__ import annotations

from proxy.apis import ConnectionScope, Session
from proxy.connection.core import ConnectionCore
from proxy.ops.usage_table import UsageTable
from quota.primitives.clock import ManualClock


class Recorded:
    """An API's metrics, each call kept in one log shared by the connection's APIs."""

    def __init__(self, log: list, api_key: int) -> None:
        self._log, self._key = log, api_key

    def request(self, nbytes: int) -> None:
        self._log.append(("request", self._key, nbytes))

    def answered(self, nbytes: int, seconds: float) -> None:
        self._log.append(("response", self._key, nbytes))
        self._log.append(("latency", self._key, seconds))


class RecordedConnection:
    """A client's connection (session ``L``, 127.0.0.1) in ``scope`` planned by ``planner``, on ``clock``: what it
    writes to either side in ``to_client`` / ``to_broker``, its metrics in ``metrics``, its usage in ``usage``."""

    clock: ManualClock

    def connect(self, scope: ConnectionScope, planner) -> None:
        self.scope = scope
        self.session = Session("L", "127.0.0.1")
        self.to_client, self.to_broker, self.metrics = bytearray(), bytearray(), []
        self.usage = UsageTable()
        self.core = ConnectionCore(
            scope,
            self.session,
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 24,
            max_inflight=10,
            write_client=self.to_client.extend,
            write_broker=self.to_broker.extend,
            clock=lambda: self.clock.now_ms() * 1_000_000,
            api_metrics=lambda key: Recorded(self.metrics, key),
            planner=planner,
            usage=self.usage,
        )

    def step(self) -> tuple:
        state = self.core.step(self.clock.now_ms() * 1_000_000)
        return state.reading_client, state.reading_broker, state.deadline
