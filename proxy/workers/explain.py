"""The parent's ``/explain`` with ``workers: N``: every live worker's answer, gathered as /metrics gathers their
expositions (:mod:`proxy.workers.scrape`): from each worker's loopback ops port, off the parent's loop, each within
:data:`FETCH_TIMEOUT_S`; a worker that does not answer is named in ``unanswered``.

Each worker holds its own connections and sensors; since the workers share their usage, each one's rates count the
others' too (lagging by ``quota.workers.sync.ms``), so the answers agree on the rates and differ in the connections
(and the throttles each worker applied). The query is checked and rate-limited here before a worker is asked.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable

from proxy.ops.explain import JSON, Limiter, checked, whole_answer
from quota.explain.values import Who, as_json

FETCH_TIMEOUT_S = 5.0
MAX_ANSWER_BYTES = 4 << 20  # a worker's answer is a few KiB; a bigger one is not read


def fetch_worker_answer(port: int, query: bytes) -> dict:
    """A worker's one answer (raises OSError or ValueError when there is none)."""
    url = f"http://127.0.0.1:{port}/explain?{query.decode('ascii')}"
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
        return json.loads(answer.read(MAX_ANSWER_BYTES))["answers"][0]


class WorkersExplainer:
    """``ports()``: ``(worker index, ops port)`` of the live workers; ``note()``: the parent's own part (the cluster
    budget it keeps for them all), or None."""

    def __init__(
        self,
        listeners: tuple[str, ...],
        ports: Callable[[], list[tuple[int, int]]],
        note: Callable[[], str | None] = lambda: None,
        fetch: Callable[[int, bytes], dict] = fetch_worker_answer,
    ) -> None:
        self._listeners = listeners
        self._ports = ports
        self._note = note
        self._fetch = fetch
        self._limiter = Limiter()

    async def answer(self, query: bytes) -> tuple[str, str, bytes]:
        who = checked(self._limiter, query, self._listeners)
        if not isinstance(who, Who):
            return who
        ports = self._ports()
        got = await asyncio.gather(
            *(asyncio.to_thread(self._fetch, port, query) for _, port in ports), return_exceptions=True
        )
        answers, unanswered = [], []
        for (index, _), answer in zip(ports, got):
            if isinstance(answer, BaseException):
                if not isinstance(answer, (OSError, ValueError, KeyError, IndexError, TypeError)):
                    raise answer
                unanswered.append(str(index))
            else:
                answers.append({**answer, "worker": str(index)})
        return "200 OK", JSON, whole_answer(as_json(who), answers, unanswered, self._note())
