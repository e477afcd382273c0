"""Partition reassignments at a volume's PAUSE: which brokers may not receive a new replica, and which targets add
one there. Pure.

A reassignment (AlterPartitionReassignments) names a partition's target replicas; every broker of the target that
is not a current replica gets a new replica, a copy of the partition's whole log. On a broker with a volume at its
hard limit that is what an operator must not do; moving a replica off such a broker, cancelling a pending
reassignment (no target) and reordering the current replicas (a new preferred leader) add nothing there, and are how
an operator frees a full disk.

Which brokers are full the cluster's volume state says (:func:`full_brokers`): those whose fresh snapshot has a
volume at its hard limit. A broker of a JBOD cluster with one full log dir among several counts as full: the broker,
not the request, picks the log dir a new replica lands in. Where the state is PAUSE for lack of data
(``missing_data_action: PAUSE``), a live broker with no fresh snapshot may be full, and counts as full; with nothing
heard at all (``awaiting_data``) every broker does (:data:`EVERY_BROKER`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from quota.managers.volume import PAUSE, BrokerUsage, VolumeState


@dataclass(frozen=True, slots=True)
class FullBrokers:
    """The brokers that may receive no new replica; ``every``: all of them (nothing is known yet)."""

    ids: frozenset[int] = frozenset()
    every: bool = False

    def __contains__(self, broker: object) -> bool:
        return self.every or broker in self.ids


EVERY_BROKER = FullBrokers(every=True)
NO_BROKER = FullBrokers()


def full_brokers(state: VolumeState, usages: Mapping[int, BrokerUsage], missing_data_action: str) -> FullBrokers:
    """The brokers a reassignment may not add a replica to, from the cluster's state and each broker's summary (the
    summaries the state was evaluated from)."""
    if state.awaiting_data:
        return EVERY_BROKER if missing_data_action == PAUSE else NO_BROKER
    missing = set(state.missing_data)
    full = {broker for broker, usage in usages.items() if usage.hard_breaches and broker not in missing}
    if missing_data_action == PAUSE:
        full |= missing
    return FullBrokers(frozenset(full))


def refused_targets(current: Collection[int] | None, target: Sequence[int] | None, full: FullBrokers) -> list[int]:
    """The brokers of ``target`` that would get a new replica on a full broker, in the target's order (empty: the
    reassignment goes on). ``target`` None cancels a pending reassignment: nothing is added. ``current`` None: the
    partition's replicas could not be learnt (no such partition, or not described to this principal): every full
    broker of the target is refused, since the disk comes first."""
    if target is None:
        return []
    known = current or ()
    return [broker for broker in dict.fromkeys(target) if broker not in known and broker in full]
