"""The partition counts of topics a CreateTopics v4 created with ``num_partitions: -1``, looked up after the fact.

A CreateTopics of ``num_partitions: -1`` (v4+, KIP-464) creates the broker's default count. From v5 the answer says
how many; a v4 answer does not. The controller mutation quota (KIP-599) must charge what the broker created, so for
each topic a v4 answer reports created with -1, the proxy asks the cluster itself: a Metadata request of its own
(:meth:`proxy.cluster.kafka_clients.OwnKafka.look`, on a connection of its own, off the request path), tried
up to ``tries`` times, ``retry_s`` after the first and twice as long before each next (0.2 s to 3.2 s: 6.2 s in
all by default), each bounded by ``timeout_s``. A broker's metadata may lag the controller's answer by a moment;
and a Streams group coordinator (KIP-1071) asks the controller for the topics its answer names as missing only
after it answered, so on a loaded broker they may appear seconds later. Whoever asked is handed the count, or None
when it could not be learnt (no answer, the topic not in the metadata, more than ``max_pending`` waiting): the
quota then charges its documented fallback, and :attr:`CreatedCounts.unknown` counts it (the
``controller_mutation_partitions_unknown_total`` metric).

Handed-back counts run on the event loop, as the response path does; nothing here touches a client's connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from proxy.cluster.kafka_clients import OwnKafka
from proxy.ground.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CLIENT_ID = "kafka-quota-proxy-partition-counts"
MAX_PENDING = 10_000  # topics waiting for a lookup; past it a count is unknown at once (memory stays bounded)

Then = Callable[[int | None], None]  # the topic's partition count, or None: not learnt


class CreatedCounts:
    """Lookups of created topics' partition counts, batched: every topic wanted while one lookup runs goes into the
    next. ``kafka`` None: nothing is looked up, every count is unknown at once (tests, and a proxy without its own
    traffic)."""

    def __init__(
        self,
        kafka: OwnKafka | None,
        timeout_s: float,
        tries: int = 6,
        retry_s: float = 0.2,
        max_pending: int = MAX_PENDING,
        on_unknown: Callable[[], None] = lambda: None,
    ) -> None:
        self._kafka, self._timeout_s, self._tries, self._retry_s = kafka, timeout_s, tries, retry_s
        self._max_pending = max_pending
        self._on_unknown = on_unknown
        self._pending: dict[str, list[Then]] = {}
        self._task: asyncio.Task | None = None
        self.unknown = 0  # counts that could not be learnt (the quota charged its fallback for each)

    def want(self, name: str, then: Then) -> None:
        """Look ``name``'s partition count up; ``then(count)`` once known, ``then(None)`` if it cannot be."""
        if self._kafka is None or (name not in self._pending and len(self._pending) >= self._max_pending):
            self._hand(then, None)
            return
        self._pending.setdefault(name, []).append(then)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _hand(self, then: Then, count: int | None) -> None:
        """``then(count)``; an unknown count is counted."""
        if count is None:
            self.unknown += 1
            self._on_unknown()
        then(count)

    async def _run(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, {}
            try:
                counts = await self._look(sorted(batch))
            except asyncio.CancelledError:  # stopping: the batch is handed None, as stop() hands what still waits
                self._hand_all(batch, {})
                raise
            self._hand_all(batch, counts)

    def _hand_all(self, batch: dict[str, list[Then]], counts: dict[str, int]) -> None:
        for name, waiting in batch.items():
            for then in waiting:
                try:
                    self._hand(then, counts.get(name))
                except Exception:  # noqa: BLE001 - one charge that fails does not lose the others
                    log.exception("charging the partitions of %s", name)

    async def _look(self, names: list[str]) -> dict[str, int]:
        """The partition count of each of ``names`` the metadata lists, after at most ``tries`` lookups."""
        counts: dict[str, int] = {}
        kafka = self._kafka
        if kafka is None:  # NO_LOOKUPS: never asked to look (a count is unknown at once)
            return counts
        for attempt in range(self._tries):
            if attempt:
                await asyncio.sleep(self._retry_s * 2 ** (attempt - 1))
            look = await kafka.look([n for n in names if n not in counts], self._timeout_s, CLIENT_ID)
            if look is not None:
                counts.update((n, len(p)) for n, p in look.partitions.items() if p)
            if len(counts) == len(names):
                break
        missing = [n for n in names if n not in counts]
        if missing:
            log.warning(
                "partition counts of %d created topic(s) not learnt (%s): the controller mutation quota "
                "charged its fallback",
                len(missing),
                ", ".join(missing[:5]),
            )
        return counts

    async def stop(self) -> None:
        """Stop looking; whoever still waits is handed None (the fallback is charged, as for any unknown count)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            await cancel_and_wait(task)
        pending, self._pending = self._pending, {}
        self._hand_all(pending, {})


NO_LOOKUPS = CreatedCounts(None, 0.0)  # every count unknown at once (a scope built without the proxy's own traffic)
