"""The proxy's internal topics (dynamic config, volume usage) are written only by the proxy and by admins.

A tenant that can write the config topic can lift its own quota or switch every quota off; one that can write the
volume-usage topic can pause every producer of the cluster. So every request that writes, deletes, truncates or
extends a topic is checked, through every listener, for the internal topics: Produce, CreateTopics, DeleteTopics,
DeleteRecords, CreatePartitions, AddPartitionsToTxn (transactional writes), and the TOPIC resources of AlterConfigs
and IncrementalAlterConfigs. For a principal not in ``admin_principals`` and a connection that is not the proxy's own
(:mod:`proxy.cluster.own_clients`, never the client id), the items naming an internal topic are answered
TOPIC_AUTHORIZATION_FAILED, as Kafka's authorizer answers them, while the rest of the same request goes to the broker
as usual and the broker's answer is merged with the refusals (forward part and merge). A request that names only
internal topics never reaches the broker. An ``acks=0`` Produce has no response to carry a refusal: as Kafka does
for an acks=0 produce that fails, the connection is closed. Each refusal is counted
(``internal_topic_writes_refused_total{topic,api}``) and logged, rate-limited per peer.

An item is judged by its name and by its topic id (DeleteTopics v6+ and Produce v13+ name topics by id; Fetch,
Metadata, OffsetCommit/OffsetFetch v10+ do too, but they write no topic): an id that is an internal topic's is
refused whatever name comes with it, since a broker may act on the id alone. An id the proxy has not seen is looked
up first (:func:`proxy.apis.metadata.look_up_topics`); one the broker cannot name either is never forwarded: it is
answered UNKNOWN_TOPIC_ID, what the broker answers for it, so no id reaches the broker unjudged.

The guard is a stage before every API's own (:func:`plan_guard`, :data:`proxy.apis.STAGES`): it decides first, on the whole body, and the
handler decides on the request without the refused items (:meth:`proxy.apis.plan.Plan.then`), so the quotas still
apply to what is forwarded, and the refusals are merged into the answer, the broker's or the proxy's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from proxy.apis.metadata import look_up_topics
from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, ConnectionScope, ForwardRequest, LookUp, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.stages import END
from proxy.cluster.topics import Topics
from proxy.codec.apis import (
    ADD_PARTITIONS_TO_TXN,
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    INCREMENTAL_ALTER_CONFIGS,
    PRODUCE,
)
from proxy.codec.enums import TOPIC_RESOURCE
from proxy.codec.error_codes import TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader, encode_response_header, frame
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, encode_response
from proxy.codec.primitives import ZERO_UUID
from proxy.codec.responses import error_response
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.session.session import Session

REFUSED_MESSAGE = (
    "kafka-quota-proxy: {topic} is an internal topic of the proxy; only the proxy and admin_principals may write it"
)
UNKNOWN_ID_MESSAGE = "kafka-quota-proxy: the broker does not know this topic id"

Item = Message | str  # what a request lists its topics as: structs, or bare names (DeleteTopics before v6)

# api -> version -> the request's list of items, and the response's
_REQUEST_ITEMS: dict[int, Callable[[int], str]] = {
    PRODUCE: lambda v: "topic_data",
    CREATE_TOPICS: lambda v: "topics",
    DELETE_TOPICS: lambda v: "topics" if v >= 6 else "topic_names",
    DELETE_RECORDS: lambda v: "topics",
    ADD_PARTITIONS_TO_TXN: lambda v: "v3_and_below_topics",
    CREATE_PARTITIONS: lambda v: "topics",
    ALTER_CONFIGS: lambda v: "resources",
    INCREMENTAL_ALTER_CONFIGS: lambda v: "resources",
}
_RESPONSE_ITEMS: dict[int, Callable[[int], str]] = {
    PRODUCE: lambda v: "responses",
    CREATE_TOPICS: lambda v: "topics",
    DELETE_TOPICS: lambda v: "responses",
    DELETE_RECORDS: lambda v: "topics",
    ADD_PARTITIONS_TO_TXN: lambda v: "results_by_topic_v3_and_below",
    CREATE_PARTITIONS: lambda v: "results",
    ALTER_CONFIGS: lambda v: "responses",
    INCREMENTAL_ALTER_CONFIGS: lambda v: "responses",
}
GUARDED = frozenset(_REQUEST_ITEMS)


def plan_guard(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """The internal-topic check, first of the body's decisions of every API that writes a topic (:data:`GUARDED`):
    the later stages decide on what it lets through."""
    guard = scope.guard
    if not guard.topics or guard.allowed(session):
        return None
    if header.api_key == PRODUCE and _streams_safely(guard, scope.topics, header):
        return None
    return Plan(action=BUFFER, decide=_Check(scope, session, header).decide)


def exempt_own_writes(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """A Produce of the proxy's own (or an admin's) that writes only one of its internal topics ends the chain: no
    quota applies, nor PAUSE, so the proxy never throttles or pauses what it publishes itself."""
    quotas = scope.quotas
    if (
        header.only_topic is not None
        and quotas.internal_topics
        and quotas.is_internal(header.only_topic, scope.topics)
        and scope.guard.allowed(session)
    ):
        return END
    return None


def _streams_safely(guard: InternalTopicGuard, topics: Topics, header: RequestHeader) -> bool:
    """A Produce whose prefix shows it writes one topic, and not an internal one: nothing to look at."""
    if header.topic_count != 1 or header.only_topic is None:
        return False
    topic = header.only_topic
    name = topics.name_for(uuid.UUID(bytes=topic)) if isinstance(topic, bytes) else topic
    if name is None:
        return False  # an id the proxy has not seen yet: the body decides (after a lookup)
    return name not in guard.topics


class _Check:
    """One request's check: split off the internal items, let the handler decide on the rest, merge the answers."""

    def __init__(self, scope: ConnectionScope, session: Session, header: RequestHeader) -> None:
        self.scope, self.guard, self.topics = scope, scope.guard, scope.topics
        self.session, self.header = session, header
        self.looked_up = False

    def decide(self, body: memoryview) -> Outcome:
        api_key, version = self.header.api_key, self.header.api_version
        msg = decode_request(api_key, version, body)
        unknown = [i for i in self._items(msg) if not isinstance(i, str) and self._unknown_id(i)]
        if unknown and not self.looked_up:
            return self._look_up(unknown, bytes(body))
        refused, unresolved = self._split(msg)
        if not refused and not unresolved:
            return FORWARD_AS_IS
        if refused:
            self.guard.refused(self.session, api_key, self._names(refused))
        if not self.header.expects_response:
            raise ValueError(
                "an acks=0 produce to an internal topic of the proxy, or to a topic id the broker does "
                "not know (refused; the connection is closed, as Kafka closes it for a failed acks=0 "
                "produce)"
            )
        refusal = self._refusal(msg, refused, unresolved)
        if not self._items(msg):  # nothing left for the broker
            return AnswerLocally(self._frame(encode_response(api_key, version, refusal)))
        # the rest goes on, and the later stages decide on it; the broker's answer (or theirs) gets the refusals
        return ForwardRequest(
            body=encode_request(api_key, version, msg),
            leg=ResponseLeg(rewrite=lambda answer: self._merge_body(answer, refusal)),
        )

    # -- items ------------------------------------------------------------------------------------------------------

    def _items(self, msg: Message) -> list[Item]:
        api_key, version = self.header.api_key, self.header.api_version
        if api_key == ADD_PARTITIONS_TO_TXN and version >= 4:
            return [t for txn in msg.transactions for t in txn.topics]
        return list(getattr(msg, _REQUEST_ITEMS[api_key](version)))

    def _internal_name(self, item: Item) -> str | None:
        """The internal topic ``item`` names, by its name or by its topic id (whatever name comes with the id: a
        broker may act on the id alone, as Tansu deletes by it), or None."""
        api_key, internal = self.header.api_key, self.guard.topics
        if isinstance(item, str):
            return item if item in internal else None
        if api_key in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
            name: str | None = item.resource_name if item.resource_type == TOPIC_RESOURCE else None
            return name if name in internal else None
        named: str | None = item.name
        if named in internal:
            return named
        topic_id = getattr(item, "topic_id", None)
        if topic_id is not None and topic_id != ZERO_UUID:
            by_id = self.topics.name_for(topic_id)
            if by_id in internal:
                return by_id
        return None

    def _unknown_id(self, item: Item) -> bool:
        """An item with a topic id the proxy cannot name (with or without a name beside it)."""
        topic_id = getattr(item, "topic_id", None)
        return (
            not isinstance(item, str)
            and topic_id is not None
            and topic_id != ZERO_UUID
            and self.topics.name_for(topic_id) is None
        )

    def _split(self, msg: Message) -> tuple[list[Item], list[Item]]:
        """Take out of ``msg`` the items naming an internal topic (AddPartitionsToTxn v4+: per transaction too) and,
        once the broker was asked, those whose topic id it could not name either; return both."""
        refused: list[Item] = []
        unresolved: list[Item] = []
        self.refused_by_txn: dict[str, list[Item]] = {}

        def keep(items: list[Item], into: list[Item]) -> list[Item]:
            kept = []
            for item in items:
                if self._internal_name(item) is not None:
                    into.append(item)
                elif self._unknown_id(item):
                    unresolved.append(item)
                else:
                    kept.append(item)
            return kept

        api_key, version = self.header.api_key, self.header.api_version
        if api_key == ADD_PARTITIONS_TO_TXN and version >= 4:
            for txn in msg.transactions:
                ours = self.refused_by_txn.setdefault(txn.transactional_id, [])
                txn.topics = keep(list(txn.topics), ours)
                refused += ours
        else:
            field = _REQUEST_ITEMS[api_key](version)
            setattr(msg, field, keep(list(getattr(msg, field)), refused))
        return refused, unresolved

    def _refusal(self, msg: Message, refused: list[Item], unresolved: list[Item]) -> Message:
        """The error response for the items taken out alone: TOPIC_AUTHORIZATION_FAILED for the internal ones,
        UNKNOWN_TOPIC_ID (what the broker answers for an id it does not know) for the ids nobody could name."""
        api_key, version = self.header.api_key, self.header.api_version
        only = decode_request(api_key, version, encode_request(api_key, version, msg))  # a copy
        if api_key == ADD_PARTITIONS_TO_TXN and version >= 4:
            only.transactions = [txn for txn in only.transactions if self.refused_by_txn.get(txn.transactional_id)]
            for txn in only.transactions:
                txn.topics = self.refused_by_txn[txn.transactional_id]
            return self._error(only, TOPIC_AUTHORIZATION_FAILED, REFUSED_MESSAGE.format(topic=self._topics(refused)))
        field = _RESPONSE_ITEMS[api_key](version)
        answers: list[Message] = []
        for items, code, message in (
            (refused, TOPIC_AUTHORIZATION_FAILED, REFUSED_MESSAGE.format(topic=self._topics(refused))),
            (unresolved, UNKNOWN_TOPIC_ID, UNKNOWN_ID_MESSAGE),
        ):
            if items:
                setattr(only, _REQUEST_ITEMS[api_key](version), items)
                refusal = self._error(only, code, message)
                answers += list(getattr(refusal, field))
        setattr(refusal, field, answers)
        return refusal

    def _error(self, only: Message, code: int, message: str) -> Message:
        return error_response(self.header.api_key, self.header.api_version, only, code, error_message=message)

    def _names(self, refused: list[Item]) -> list[str]:
        """The internal topics the refused items name, sorted, each once."""
        return sorted({n for n in (self._internal_name(i) for i in refused) if n})

    def _topics(self, refused: list[Item]) -> str:
        return ", ".join(self._names(refused))

    # -- answers --------------------------------------------------------------------------------------------------

    def _merge_body(self, body: memoryview, refusal: Message) -> bytes:
        """The broker's (or a handler's) response body with the refused items added."""
        api_key, version = self.header.api_key, self.header.api_version
        response = decode_response(api_key, version, body)
        if api_key == ADD_PARTITIONS_TO_TXN and version >= 4:
            ours = {r.transactional_id: list(r.topic_results) for r in refusal.results_by_transaction}
            for result in response.results_by_transaction:
                result.topic_results = list(result.topic_results) + ours.pop(result.transactional_id, [])
            for txn_id, topics in ours.items():
                if topics:
                    response.results_by_transaction = list(response.results_by_transaction) + [
                        r for r in refusal.results_by_transaction if r.transactional_id == txn_id
                    ]
        else:
            field = _RESPONSE_ITEMS[api_key](version)
            setattr(response, field, list(getattr(response, field)) + list(getattr(refusal, field)))
        return encode_response(api_key, version, response)

    def _frame(self, body: bytes) -> bytes:
        api_key, version = self.header.api_key, self.header.api_version
        return frame(encode_response_header(api_key, version, self.header.correlation_id) + body)

    def _look_up(self, unknown: list[Message], body: bytes) -> LookUp:
        """Topic ids the proxy has not seen: ask the broker their names first, then decide."""

        def then() -> Outcome:
            self.looked_up = True
            return self.decide(memoryview(body))

        return look_up_topics(self.scope, self.session, [(None, item.topic_id) for item in unknown], then)
