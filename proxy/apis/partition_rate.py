"""Byte rates per partition (``entity: {topic: NAME, partition: N|<default>}``): what the topic stages
(:mod:`proxy.apis.topic_rate`) add for them.

A partition quota is the topic quota's measurement on one partition's record bytes
(:class:`quota.managers.topic_quota.PartitionQuotaManager`), beside the topic's own quota: a request is given the
longest throttle of its client's, its topics' and its partitions' quotas. Under ``on_exceed: reject`` a partition
over its own quota is refused (``NOT_ENOUGH_REPLICAS``, :mod:`proxy.apis.topic_reject`) before the topic's quota
is asked; a partition the topic's quota then refuses gives back what its own quota had taken for it, so nothing
unwritten is counted. A Fetch answer's partition over its quota has its records cut to its headroom (its first batch
kept) before the topic's trim, so a hot partition's answer cannot carry it far past its quota.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from proxy.apis.byte_rate import trim_partitions
from proxy.apis.decisions import Decisions
from proxy.codec.messages import Message
from quota.managers.topic_quota import PartitionQuotaManager
from quota.primitives.decision import Decision, Throttle
from quota.primitives.topic_quotas import PARTITION_PRODUCER_BYTE_RATE

Partition = tuple[str, int]  # (topic, index)


def of_partition(decision: Decision, quota: str, name: Partition) -> Decision:
    """A partition quota's decision as the request carries it: it says which partition decided it, and carries no
    client byte-rate figures (the usage log's ``quota_rate`` is the client's; a partition's bytes have their own
    field, ``partition_bytes``)."""
    if not isinstance(decision, Throttle):
        return decision
    return dataclasses.replace(
        decision, bound=0.0, observed_rate=0.0, by=f"{quota} (topic {name[0]} partition {name[1]})"
    )


class ProducePartitions:
    """One Produce's partitions under partition quotas: admitted or refused (:meth:`admit`), and what is written
    recorded (:meth:`decide`)."""

    __slots__ = ("quota", "counted", "written", "refused")

    def __init__(self, quota: PartitionQuotaManager) -> None:
        self.quota = quota
        self.counted: dict[Partition, int] = {}  # bytes of partitions under a throttling quota, recorded at decide
        self.written: dict[Partition, int] = {}  # bytes admitted under a rejecting one (recorded by admit)
        self.refused: list[str] = []  # the labels of partitions refused by their own quota

    def admit(self, topic: str, partitions: Sequence[Message], sizes: Sequence[int]) -> list[bool]:
        """Which of ``partitions`` (of one topic item, their record bytes ``sizes``) their own quotas let through."""
        quota = self.quota
        if not quota.enabled:
            return [True] * len(sizes)
        admitted = []
        for partition, size in zip(partitions, sizes):
            name = (topic, partition.index)
            ok = True
            if quota.rejecting(name):
                ok = quota.admit(name, (size,))[0]
                if ok:
                    self.written[name] = self.written.get(name, 0) + size
                else:
                    self.refused.append(quota.label(name) or f"{topic}/{partition.index}")
            else:
                if quota.shadow_rejecting(name):  # what it would refuse, counted; all of it written
                    quota.admit(name, (size,), shadow=True)
                self.counted[name] = self.counted.get(name, 0) + size
            admitted.append(ok)
        return admitted

    def give_back(self, topic: str, partition: Message, size: int) -> None:
        """A partition admitted here and then refused by its topic's quota: nothing of it is written or counted."""
        name = (topic, partition.index)
        if name in self.written:
            self.written[name] -= size
            self.quota.unrecord(*self.quota.pair(name), size)
        elif name in self.counted:
            self.counted[name] -= size

    def decide(self, decisions: Decisions, client_id: str | None) -> None:
        """Record each throttled partition's bytes; its throttle joins the request's."""
        for name, size in self.counted.items():
            decision = of_partition(self.quota.record_topic(name, size), PARTITION_PRODUCER_BYTE_RATE, name)
            decisions.add(PARTITION_PRODUCER_BYTE_RATE, decision, client_id)

    def labelled(self) -> tuple[tuple[str, int], ...]:
        """The bytes written to partitions under a quota, by metric label (bounded by the configuration)."""
        out: dict[str, int] = {}
        for counts in (self.counted, self.written):
            for name, size in counts.items():
                label = self.quota.label(name)
                if label is not None and size:
                    out[label] = out.get(label, 0) + size
        return tuple(out.items())


def trim_fetched(quota: PartitionQuotaManager, topic: str, partitions: Sequence[Message]) -> bool:
    """Cut each partition of a Fetch answer's topic item under an enforced partition quota to its headroom (its
    first batch kept); whether anything was cut."""
    cut = False
    for partition in partitions:
        name = (topic, partition.partition_index)
        resolved = quota.resolve_topic(name)
        if resolved.unlimited or quota.shadow or resolved.shadow:
            continue
        cut = trim_partitions([partition], int(quota.headroom(name)))[1] or cut
    return cut


def count_fetched(counted: dict[Partition, int], topic: str, partitions: Sequence[Message]) -> None:
    """Add each partition's record bytes of an answer's topic item to ``counted``."""
    for partition in partitions:
        if partition.records is not None:
            name = (topic, partition.partition_index)
            counted[name] = counted.get(name, 0) + len(partition.records)
