"""The controller mutation quota (KIP-599) on CreateTopics, CreatePartitions and DeleteTopics.

Each request is buffered and decided on its body, once, when the client's ``controller_mutation_rate`` applies:

- what it costs, per topic: the partitions it creates (CreateTopics: the assignments' count, else
  ``num_partitions``, else for -1 the broker's default as the broker's own CreateTopics answers report it), adds
  (CreatePartitions: new count - current count) or deletes (DeleteTopics: the topic's count, by name or id).
  Counts come from :class:`proxy.cluster.topics.Topics`; a count it does not have (or has only too old) is looked
  up first with a Metadata request of the proxy's own on the same connection
  (:func:`proxy.apis.metadata.look_up_topics`), so nothing is guessed and the request keeps its place. The
  brokers' answers to the mutations forwarded teach ``Topics`` the counts created and deleted (observers, on the
  response path). ``validate_only`` requests cost nothing;
- strict versions (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): topics are admitted in request order
  while the bucket is not negative; the rest get THROTTLING_QUOTA_EXCEEDED (89) and never reach the broker. A
  request with some topics admitted is forwarded holding only those, and the broker's per-topic results are merged
  with the proxy's rejections, in request order; with none admitted the proxy answers itself. ``throttle_time_ms``
  is set and the connection muted for the throttle;
- older versions: forwarded whole, recorded, and the response carries the throttle and goes at once, and the
  connection is muted after it (before KIP-219 too), as Kafka >= 2.0 treats old clients;
- the broker's answer settles the charge (:mod:`proxy.apis.mutation_charges`): topics it reports with an error
  are given back, and the throttle the response carries (and the mute) is what is left of the one decided.

A CreateTopics of ``num_partitions: -1`` (v4+, KIP-464) is charged the broker's default learnt from earlier answers
(:attr:`Topics.default_partitions`); before that is known it is admitted by the same rule, taking nothing. Either
way the charge is set to what the broker created once that is known: v5+ answers carry ``num_partitions``; a v4
answer does not, so each topic it reports created is looked up off the request path
(:mod:`proxy.cluster.created_counts`, a Metadata request of the proxy's own) and charged when the lookup answers.
A count that cannot be learnt leaves the learnt default taken at admission, or, when none was known, charges
FALLBACK_PARTITIONS (1, Kafka's own ``num.partitions`` default); ``controller_mutation_partitions_unknown_total``
counts those.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

from proxy.apis.decisions import Decisions
from proxy.apis.internal_topics import Item
from proxy.apis.metadata import look_up_topics
from proxy.apis.mutation_charges import Charges, topic_keys
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, ConnectionScope, ForwardRequest, LookUp, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    CREATE_TOPICS_REPORTS_PARTITIONS_SINCE,
    DELETE_TOPICS,
    strict_mutation_quota,
)
from proxy.codec.error_codes import NONE, THROTTLING_QUOTA_EXCEEDED
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, encode_response
from proxy.codec.primitives import ZERO_UUID
from proxy.codec.responses import encode_local_response, error_response
from proxy.session.session import Session
from quota.primitives.decision import Throttle

# What a -1 create is charged when its count cannot be learnt and no default was: Kafka's own num.partitions default
FALLBACK_PARTITIONS = 1

ItemT = TypeVar("ItemT", bound=Item)  # a request's topic item: a struct, or (DeleteTopics before v6) a name


def plan_create_topics(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan(scope, session, header, _CreateTopics)


def plan_delete_topics(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan(scope, session, header, _DeleteTopics)


def plan_create_partitions(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan(scope, session, header, _CreatePartitions)


def _plan(scope: ConnectionScope, session: Session, header: RequestHeader, kind: type[_Mutation[Any]]) -> Plan:
    quotas = scope.quotas.mutations
    client_id = header.client_id or ""
    if not quotas.enabled or quotas.resolve(session.user, client_id).unlimited:
        return PASS
    mutation = kind(scope, session, client_id, header.api_version, header.correlation_id)
    return Plan(action=BUFFER, decide=mutation.decide)


class _Mutation(Generic[ItemT]):
    """One request's decision: decode, count (looking up what is unknown), admit, split and merge."""

    api_key: int
    results_field: str  # the response's list of per-topic results

    looked_up = False  # the proxy's lookup has been answered: what is still unknown does not exist
    charges: Charges  # what admission took, per topic (set when decided)

    def __init__(
        self, scope: ConnectionScope, session: Session, client_id: str, version: int, correlation_id: int
    ) -> None:
        self.scope, self.session, self.user, self.client_id = scope, session, session.user, client_id
        self.version = version
        self.correlation_id = correlation_id
        self.quotas = scope.quotas.mutations

    # -- per API --------------------------------------------------------------------------------------------------

    def topics(self, msg: Message) -> list[ItemT]:
        """The request's topic items, in order."""
        raise NotImplementedError

    def key(self, item: ItemT) -> tuple[str | None, uuid.UUID | None]:
        """(name, topic id) of a request item."""
        return (item, None) if isinstance(item, str) else (item.name, None)

    def count(self, item: ItemT, now_ms: int) -> int | None:
        """Partitions this item creates or deletes; None when the proxy must look something up first."""
        raise NotImplementedError

    def keep(self, msg: Message, items: list[ItemT]) -> None:
        raise NotImplementedError

    def learn(self, msg: Message, request_items: list[ItemT], now_ms: int) -> None:
        """What the broker's answer teaches (counts created or deleted); called for every forwarded request."""

    # -- the decision -----------------------------------------------------------------------------------------------

    def decide(self, body: memoryview) -> Outcome:
        msg = decode_request(self.api_key, self.version, body)
        if getattr(msg, "validate_only", False):
            return FORWARD_AS_IS  # validation puts no load on the controller: not counted (KIP-599)
        items = self.topics(msg)
        now = self.scope.quotas.clock.now_ms()
        unknown = self.unknown(items, now)
        if unknown:
            return self.look_up(unknown, lambda: self.decided(msg, items))
        return self.decided(msg, items)

    def unknown(self, items: list[ItemT], now_ms: int) -> list[tuple[str | None, uuid.UUID | None]]:
        """The (name, id) of each topic whose count must be looked up before deciding."""
        return [self.key(item) for item in items if self.count(item, now_ms) is None]

    def result_key(self, result: Message) -> object:
        return result.name

    def look_up(self, keys: Sequence[tuple[str | None, uuid.UUID | None]], then: Callable[[], Outcome]) -> LookUp:
        """A Metadata request for the topics whose counts are missing; the answer is learnt, then ``then`` decides."""

        def answered() -> Outcome:
            self.looked_up = True
            return then()

        return look_up_topics(self.scope, self.session, keys, answered)

    def decided(self, msg: Message, items: list[ItemT]) -> Outcome:
        now = self.scope.quotas.clock.now_ms()
        counts = [self.count(item, now) for item in items]
        if strict_mutation_quota(self.api_key, self.version):
            return self.strict(msg, items, counts)
        total = self.charge(items, counts, [True] * len(items))
        charged = self.charges.usage
        decisions = Decisions()
        decisions.add(
            "controller_mutation_rate", self.quotas.record_and_decide(self.user, self.client_id, total), self.client_id
        )
        return ForwardRequest(leg=self.leg(items), throttle=decisions.throttle, usage=decisions.usage + charged)

    def strict(self, msg: Message, items: list[ItemT], counts: list[int | None]) -> Outcome:
        admission = self.quotas.admit(self.user, self.client_id, counts)
        self.charge(items, counts, admission.admitted)
        usage = self.charges.usage  # what admission took
        decisions = Decisions()
        if admission.throttle is not None:
            decisions.add("controller_mutation_rate", admission.throttle, self.client_id)
        throttle = decisions.throttle
        if throttle is None or admission.all_admitted:
            return ForwardRequest(leg=self.leg(items), throttle=throttle, usage=usage + decisions.usage)
        admitted = [item for item, ok in zip(items, admission.admitted) if ok]
        rejected = [self.key(item) for item, ok in zip(items, admission.admitted) if not ok]
        message = (
            f"The throttling quota has been exceeded: controller_mutation_rate allows "
            f"{self.quotas.resolve(self.user, self.client_id).limit:g} partition mutations/s; retry after "
            f"{throttle.throttle_time_ms} ms"
        )
        rejected_errors: dict[Hashable, int] = {
            key: THROTTLING_QUOTA_EXCEEDED
            for name, topic_id in rejected
            for key in ((name,) if name else ()) + ((topic_id,) if topic_id else ())
        }
        if not admitted:  # answered as decided: nothing to settle, counted as told
            self.quotas.record_throttle(self.user, self.client_id, throttle.throttle_time_ms)
            response = error_response(
                self.api_key,
                self.version,
                msg,
                NONE,
                item_errors=rejected_errors,
                throttle_time_ms=throttle.throttle_time_ms,
                error_message=message,
            )
            return AnswerLocally(
                encode_local_response(self.api_key, self.version, self.correlation_id, response),
                throttle=throttle,
                usage=usage + decisions.usage,
            )
        template = error_response(
            self.api_key, self.version, msg, NONE, item_errors=rejected_errors, error_message=message
        )
        ours = [(ok, result) for result, ok in zip(getattr(template, self.results_field), admission.admitted)]
        self.keep(msg, admitted)
        version, api_key, field, result_key = self.version, self.api_key, self.results_field, self.result_key

        def merge(body: memoryview) -> bytes:
            """The broker's results and the proxy's rejections, in the client's request order (the broker's for a
            topic it answered; any result the proxy cannot place goes last)."""
            response = decode_response(api_key, version, body)
            broker: dict[object, list[Message]] = {}
            for result in getattr(response, field):
                broker.setdefault(result_key(result), []).append(result)
            merged: list[Message] = []
            for ok, template_result in ours:
                if not ok:
                    merged.append(template_result)
                    continue
                answered = broker.get(result_key(template_result))
                if answered:
                    merged.append(answered.pop(0))
            merged += [r for results in broker.values() for r in results]
            setattr(response, field, merged)
            return encode_response(api_key, version, response)

        return ForwardRequest(
            body=encode_request(self.api_key, self.version, msg),
            leg=ResponseLeg(rewrite=merge).then(self.leg(admitted)),
            throttle=throttle,
            usage=usage + decisions.usage,
        )

    def charge(self, items: list[ItemT], counts: list[int | None], admitted: Sequence[bool]) -> int:
        """Note what admission took per admitted topic (given back if the broker reports it failed); the total."""
        taken = [(topic_keys(*self.key(item)), count or 0) for item, count, ok in zip(items, counts, admitted) if ok]
        now = self.scope.quotas.clock.now_ms()
        self.charges = Charges(self.quotas, self.user, self.client_id, taken, now, refused=not all(admitted))
        return self.charges.total

    def leg(self, items: list[ItemT]) -> ResponseLeg:
        """What the broker's answer to the forwarded ``items`` goes through: learnt from, then the charge settled;
        what the answer changed of the charge, accounted for."""
        return ResponseLeg(observe=self.learner(items), settle=self.settle, accounted=self.charges.accounted)

    def learner(self, items: list[ItemT]) -> Callable[[memoryview], None]:
        scope, version, api_key = self.scope, self.version, self.api_key

        def learn(body: memoryview) -> None:
            msg = decode_response(api_key, version, body)
            now = scope.quotas.clock.now_ms()
            self.learn(msg, items, now)
            self.charges.failed(getattr(msg, self.results_field), now)

        return learn

    def settle(self, throttle: Throttle) -> Throttle:
        return self.charges.settle(throttle, self.scope.quotas.clock.now_ms())


class _CreateTopics(_Mutation[Message]):
    api_key = CREATE_TOPICS
    results_field = "topics"

    def topics(self, msg: Message) -> list[Message]:
        return list(msg.topics)

    def count(self, item: Message, now_ms: int) -> int | None:
        if item.assignments:
            return len(item.assignments)
        asked: int = item.num_partitions
        if asked >= 0:
            return asked
        return self.scope.topics.default_partitions  # None until a broker's answer has shown it

    def unknown(self, items: list[Message], now_ms: int) -> list[tuple[str | None, uuid.UUID | None]]:
        return []  # a count unknown here is the broker's default, taken from its answer (see learn)

    def keep(self, msg: Message, items: list[Message]) -> None:
        msg.topics = items

    def learn(self, msg: Message, request_items: list[Message], now_ms: int) -> None:
        asked_default = {t.name for t in request_items if not t.assignments and t.num_partitions < 0}
        if self.version < CREATE_TOPICS_REPORTS_PARTITIONS_SINCE:  # the answer says no count: looked up
            for result in msg.topics:
                if result.error_code == NONE and result.name in asked_default:
                    self.scope.counts.want(result.name, partial(self.created_with_default, result.name))
            return
        topics = self.scope.topics
        for result in msg.topics:
            if result.error_code != NONE or result.num_partitions < 0:
                continue
            topics.created(result.name, result.num_partitions, now_ms, default=result.name in asked_default)
            if result.name not in asked_default:
                continue
            self.charge_default(result.name, result.num_partitions, now_ms)

    def charge_default(self, name: str, partitions: int, now_ms: int) -> None:
        """A -1 create made ``partitions``: charge that, whatever admission took (the learnt default, or nothing)."""
        more = partitions - self.charges.taken_for(name)
        self.charges.more(more, now_ms)
        self.charges.give_back(-more, now_ms)

    def created_with_default(self, name: str, partitions: int | None) -> None:
        """The count a v4 -1 create made, looked up after its answer (:mod:`proxy.cluster.created_counts`); None:
        not learnt, so the learnt default taken at admission stands, or, if none was known, FALLBACK_PARTITIONS."""
        now = self.scope.quotas.clock.now_ms()
        if partitions is None:
            if not self.charges.taken_for(name):
                self.charges.more(FALLBACK_PARTITIONS, now)
            return
        self.scope.topics.created(name, partitions, now, default=True)
        self.charge_default(name, partitions, now)


class _DeleteTopics(_Mutation[Item]):
    api_key = DELETE_TOPICS
    results_field = "responses"

    def topics(self, msg: Message) -> list[Item]:
        if self.version >= 6:
            return list(msg.topics)
        return list(msg.topic_names)

    def key(self, item: Item) -> tuple[str | None, uuid.UUID | None]:
        if isinstance(item, str):  # before v6: the name alone
            return item, None
        topic_id = None if item.topic_id == ZERO_UUID else item.topic_id
        return item.name or (self.scope.topics.name_for(topic_id) if topic_id else None), topic_id

    def result_key(self, result: Message) -> object:
        return result.name or result.topic_id

    def count(self, item: Item, now_ms: int) -> int | None:
        name, _ = self.key(item)
        found = None if name is None else self.scope.topics.partitions(name, now_ms, self._max_age())
        if found is None and self.looked_up:
            return 0  # the broker does not know it either: nothing is deleted
        return found

    def keep(self, msg: Message, items: list[Item]) -> None:
        if self.version >= 6:
            msg.topics = items
        else:
            msg.topic_names = items

    def learn(self, msg: Message, request_items: list[Item], now_ms: int) -> None:
        for result in msg.responses:
            name = result.name or (self.scope.topics.name_for(result.topic_id) if self.version >= 6 else None)
            if result.error_code == NONE and name:
                self.scope.topics.deleted(name, now_ms)

    def _max_age(self) -> int:
        return self.scope.quotas.metadata_max_age_ms


class _CreatePartitions(_Mutation[Message]):
    api_key = CREATE_PARTITIONS
    results_field = "results"

    def topics(self, msg: Message) -> list[Message]:
        return list(msg.topics)

    def count(self, item: Message, now_ms: int) -> int | None:
        current = self.scope.topics.partitions(item.name, now_ms, self.scope.quotas.metadata_max_age_ms)
        if current is None:
            return 0 if self.looked_up else None
        wanted: int = item.count
        return max(0, wanted - current)

    def keep(self, msg: Message, items: list[Message]) -> None:
        msg.topics = items

    def learn(self, msg: Message, request_items: list[Message], now_ms: int) -> None:
        asked = {t.name: t.count for t in request_items}
        for result in msg.results:
            if result.error_code == NONE and result.name in asked:
                self.scope.topics.created(result.name, asked[result.name], now_ms)
