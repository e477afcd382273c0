"""A connection's API metrics written into one log, for tests that compare two connections call by call."""

from __future__ import annotations


class Recorded:
    """An API's metrics, each call kept in one log shared by the connection's APIs."""

    def __init__(self, log: list, api_key: int) -> None:
        self._log, self._key = log, api_key

    def request(self, nbytes: int) -> None:
        self._log.append(("request", self._key, nbytes))

    def response(self, nbytes: int) -> None:
        self._log.append(("response", self._key, nbytes))

    def latency(self, seconds: float) -> None:
        self._log.append(("latency", self._key, seconds))

    def answered(self, nbytes: int, seconds: float) -> None:
        self.response(nbytes)
        self.latency(seconds)
