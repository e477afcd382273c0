"""What a request's plan, its outcome and its response leg account for, as data: the connection records each once
(:class:`proxy.connection.request_frames.Accounting`: the request path a plan's and an outcome's, the response path a
leg's), in the usage log's row of the request's entity and in the shadow throttles' count; handlers write nothing.

Several stages' usage adds up as their plans combine (:meth:`proxy.apis.plan.Plan.then`): new producer ids and
partition mutations are summed, topics' bytes and groups' requests listed; the shadow throttle is the longest any stage would have
applied, as applied throttles combine; every decision computed but not applied is noted (counted and logged).
"""

from __future__ import annotations

from dataclasses import dataclass

from quota.primitives.decision import Decision


@dataclass(frozen=True, slots=True)
class ShadowNote:
    """A decision computed but not applied (``quota``: its name in metrics and logs)."""

    quota: str
    decision: Decision
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Usage:
    shadow_throttle_ms: int = 0  # the longest throttle a shadow decision would have applied
    new_producer_ids: int = 0  # producer ids counted new against the user's producer_ids_rate
    partition_mutations: int = 0  # partitions charged to controller_mutation_rate
    shadows: tuple[ShadowNote, ...] = ()  # counted in quota_shadow_throttles_total and logged
    # record bytes charged to topic quotas, by the topic's label (its name when its own entry sets the quota, else
    # <default>)
    topic_bytes: tuple[tuple[str, int], ...] = ()
    # requests counted against group request_rate quotas, by the group's label (as topics are labelled)
    group_requests: tuple[tuple[str, int], ...] = ()
    # record bytes charged to partition quotas, by the partition's label (topic/N when its own entry sets the quota,
    # else topic/<default>)
    partition_bytes: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: Usage) -> Usage:
        if other is NO_USAGE:
            return self
        if self is NO_USAGE:
            return other
        return Usage(
            max(self.shadow_throttle_ms, other.shadow_throttle_ms),
            self.new_producer_ids + other.new_producer_ids,
            self.partition_mutations + other.partition_mutations,
            self.shadows + other.shadows,
            self.topic_bytes + other.topic_bytes,
            self.group_requests + other.group_requests,
            self.partition_bytes + other.partition_bytes,
        )


NO_USAGE = Usage()
