"""Connections held for their IP's ``connection_creation_rate`` (KIP-612), each until its own time: one heap, ended
by the listener's one timer, as every time-bound state is. A task sleeping per held connection cost a flood over its
rate a task, a coroutine and a timer each; a push and a pop cost little beside the accept itself. Pure: the listener
gives the times and acts on what is due."""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

T = TypeVar("T")


class HeldQueue(Generic[T]):
    __slots__ = ("_heap", "_order")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()  # among the same time, first held first out (and items are never compared)

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, due: float, item: T) -> bool:
        """``item`` held until ``due``; True when it is now the first due (the timer must be set again)."""
        heapq.heappush(self._heap, (due, next(self._order), item))
        return self._heap[0][2] is item

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> list[T]:
        """The items whose time has come, in order; taken out."""
        heap, out = self._heap, []
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap)[2])
        return out

    def drain(self) -> list[T]:
        """Every item still held, taken out (the listener closes)."""
        items = [item for _, _, item in sorted(self._heap)]
        self._heap.clear()
        return items
