"""One connection core whose client, broker and metrics are logs, for tests that compare two connections call by
call (a reusing planner beside an always-asking one)."""

from __future__ import annotations

from proxy.apis import ConnectionScope
from quota.primitives.clock import ManualClock
from tests.proxy.core_wire import CoreWire


class Recorded:
    """An API's metrics, each call kept in one log shared by the connection's APIs."""

    def __init__(self, log: list, api_key: int) -> None:
        self._log, self._key = log, api_key

    def request(self, nbytes: int) -> None:
        self._log.append(("request", self._key, nbytes))

    def answered(self, nbytes: int, seconds: float) -> None:
        self._log.append(("response", self._key, nbytes))
        self._log.append(("latency", self._key, seconds))


class RecordedConnection(CoreWire):
    """A client's connection (session ``L``, 127.0.0.1) in ``scope`` planned by ``planner``, on ``clock``: a
    :class:`CoreWire` whose APIs' metrics are kept, call by call, in ``metrics``."""

    clock: ManualClock

    def connect(self, scope: ConnectionScope, planner) -> None:
        self.metrics: list = []
        super().__init__(scope, self.clock, api_metrics=lambda key: Recorded(self.metrics, key), planner=planner)

    def step(self) -> tuple:
        state = self.core.step(self.now_ns())
        return state.reading_client, state.reading_broker, state.deadline
