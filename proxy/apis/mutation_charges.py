"""What one controller mutation request was charged (KIP-599), and what the broker's answer gives back.

Kafka validates first and charges only the partitions it creates, deletes or extends. The proxy must admit before
the broker has said anything, so it notes what admission took per admitted topic; when the answer arrives, the
tokens of every topic reported with an error (TOPIC_ALREADY_EXISTS, INVALID_*, POLICY_VIOLATION, unauthorised,
unknown...) are given back (never above the burst), and the throttle the response carries is what is left of the
one decided: less the time since the charge (Kafka's ``throttleTime`` runs from the charge, while the mute starts
only when the response goes out) and less the tokens given back at the quota's rate. That settled throttle is what
the entity's throttle-time counters count (``controller_mutation_throttle_time_seconds_total``, ``..._throttled_requests``);
a request refused some of its topics counts as throttled even when the broker took longer than its throttle.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from proxy.apis.response_leg import Account
from proxy.apis.usage import NO_USAGE, Usage
from proxy.codec.error_codes import NONE
from proxy.codec.primitives import ZERO_UUID
from proxy.codec.schema import Message
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.primitives.decision import Throttle

TopicKey = str | UUID


def topic_keys(name: str | None, topic_id: UUID | None = None) -> frozenset[TopicKey]:
    """A topic's name and id, whichever are known: what a request item and a result are matched on."""
    return frozenset(k for k in (name, topic_id) if k is not None and k != "" and k != ZERO_UUID)


class Charges:
    """The tokens one request took, per admitted topic, from its entity's bucket; and what the usage log is to be
    told of them, as data: what admission took (:attr:`usage`, recorded with the request's outcome), then what the
    broker's answer changed (:meth:`accounted`, recorded by the response path)."""

    __slots__ = ("_quotas", "_user", "_client_id", "_taken", "decided_ms", "refunded", "refused", "_changed", "_later")

    def __init__(
        self,
        quotas: ControllerMutationQuotaManager,
        user: str,
        client_id: str,
        taken: list[tuple[frozenset[TopicKey], int]],
        now_ms: int,
        refused: bool = False,
    ) -> None:
        self._quotas, self._user, self._client_id = quotas, user, client_id
        self.refused = refused  # some of the request's topics were refused (THROTTLING_QUOTA_EXCEEDED)
        self._taken = taken  # (the topic's keys, tokens taken), in request order
        self.decided_ms = now_ms
        self.refunded = 0
        self._changed = 0  # tokens charged more (+) or given back (-) since admission, not yet accounted for
        self._later: Account | None = None  # once the response went out: records what changes after

    @property
    def usage(self) -> Usage:
        """What admission charged, for the usage log's ``partition_mutations``."""
        total = self.total
        return Usage(partition_mutations=total) if total else NO_USAGE

    @property
    def total(self) -> int:
        return sum(n for _, n in self._taken)

    def taken_for(self, name: str) -> int:
        return sum(n for keys, n in self._taken if name in keys)

    def more(self, tokens: int, now_ms: int) -> None:
        """A count learnt from the answer (CreateTopics -1): take what admission could not."""
        if tokens > 0:
            self._quotas.record(self._user, self._client_id, tokens, now_ms)
            self._changed_by(tokens)

    def give_back(self, tokens: int, now_ms: int) -> None:
        if tokens > 0:
            self._quotas.refund(self._user, self._client_id, tokens, now_ms)
            self._changed_by(-tokens)
            self.refunded += tokens

    def _changed_by(self, tokens: int) -> None:
        if self._later is not None:  # after the response: a count looked up off the request path
            self._later(Usage(partition_mutations=tokens))
        else:
            self._changed += tokens

    def accounted(self, later: Account) -> Usage:
        """What the broker's answer changed of the charge (tokens given back are negative), for the usage log;
        whatever changes after this (a count the proxy looks up once the response went out) goes to ``later``."""
        changed, self._changed, self._later = self._changed, 0, later
        return Usage(partition_mutations=changed) if changed else NO_USAGE

    def failed(self, results: Iterable[Message], now_ms: int) -> None:
        """Give back the tokens of every admitted topic the broker's results report with an error."""
        failed: set[TopicKey] = set()
        for result in results:
            if result.error_code != NONE:
                failed |= topic_keys(getattr(result, "name", None), getattr(result, "topic_id", None))
        self.give_back(sum(n for keys, n in self._taken if keys & failed), now_ms)

    def settle(self, throttle: Throttle, now_ms: int) -> Throttle:
        """The request's throttle once the broker has answered; the mute is capped as the decided one was."""
        rate = self._quotas.resolve(self._user, self._client_id).limit
        given = self.refunded * 1000.0 / rate if self.refunded and rate > 0 else 0.0
        left = max(0, int(throttle.throttle_time_ms - max(0, now_ms - self.decided_ms) - given))
        if not throttle.shadow:
            # the throttle-time counters; a request refused topics counts even when the broker took all its time
            self._quotas.record_throttle(self._user, self._client_id, left, now_ms, refused=self.refused)
        return Throttle(left, min(throttle.mute_ms, left), throttle.shadow)
