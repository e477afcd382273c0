"""The usage records one proxy has made and not yet had acknowledged by the usage topic (issue 34). Pure.

Each sync makes one record, numbered ``(incarnation, seq)`` (:mod:`quota.sharing.usage_delta`) and dated when made. The
publisher sends the records waiting here in order, each until the topic acknowledges it: a send that fails (the
broker down, a timeout) leaves it here, and the next sync sends it again, the same bytes with the same number and
date, before its own. The usage of a failed send therefore reaches the peers late rather than never, and a send
that timed out although the broker had appended it counts once all the same: followers apply each number once
(:meth:`quota.sharing.cluster_peers.ClusterPeers.first_time`).

Bounded: a record older than ``stale_ms`` is dropped unsent (followers would skip it as stale anyway), and past
:data:`MAX_PENDING_RECORDS` records' worth of ``max_bytes`` the oldest waiting records are dropped too; both are
counted (:attr:`UsageOutbox.expired`) for the publisher to log. So at the defaults (one record a second, stale after
10 s) at most 11 records wait.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

MAX_PENDING_RECORDS = 16
"""The waiting records' bytes are at most this many full records (``quota.cluster.record.max.bytes`` each)."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    seq: int
    stamp_ms: int  # the record's timestamp: when it was made, whenever it is sent
    data: bytes


class UsageOutbox:
    """Records waiting for the topic's acknowledgement, oldest first."""

    __slots__ = ("stale_ms", "max_bytes", "_waiting", "_bytes", "expired", "_seq")

    def __init__(self, stale_ms: int, max_record_bytes: int) -> None:
        self.stale_ms = stale_ms
        self.max_bytes = max_record_bytes * MAX_PENDING_RECORDS
        self._waiting: deque[Outgoing] = deque()
        self._bytes = 0
        self.expired = 0  # records dropped unsent, in all
        self._seq = 0

    def next_seq(self) -> int:
        """The number of the next record (from 1)."""
        self._seq += 1
        return self._seq

    def add(self, seq: int, data: bytes, stamp_ms: int) -> Outgoing:
        record = Outgoing(seq, stamp_ms, data)
        self._waiting.append(record)
        self._bytes += len(data)
        while self._bytes > self.max_bytes and len(self._waiting) > 1:
            self._drop()
        return record

    def due(self, now_ms: int) -> list[Outgoing]:
        """The records to send now, in order (those older than ``stale_ms`` dropped first)."""
        while self._waiting and now_ms - self._waiting[0].stamp_ms > self.stale_ms:
            self._drop()
        return list(self._waiting)

    def sent(self, record: Outgoing) -> None:
        """``record``, the oldest waiting, was acknowledged."""
        if not self._waiting or self._waiting[0] is not record:
            raise ValueError(f"record {record.seq} acknowledged out of order")
        self._waiting.popleft()
        self._bytes -= len(record.data)

    def __len__(self) -> int:
        return len(self._waiting)

    def _drop(self) -> None:
        self._bytes -= len(self._waiting.popleft().data)
        self.expired += 1
