"""A Produce some of whose partitions a topic quota refuses (``on_exceed: reject``): forward the rest, answer those.

The refused partitions are answered ``NOT_ENOUGH_REPLICAS`` by the proxy and never reach the broker; the others go
on in a request of the same version holding only them (every record batch copied as the client sent it, never
re-encoded), and the broker's answer gets the refused partitions' results merged in, so the client gets one result
per partition it sent. A request every partition of which is refused is answered by the proxy alone. An ``acks=0``
Produce gets no answer either way (the runtime sends none): its refused partitions are dropped, as a broker drops
what it cannot write for an ``acks=0`` producer.

``NOT_ENOUGH_REPLICAS`` because it says what happened and what to do, to every client: nothing of the partition was
written (the broker refuses a write with it before appending) and it is retriable (a ``RetriableException`` in
Kafka's Java client, retried by librdkafka, kafka-python and aiokafka), without the metadata refresh that
``NOT_LEADER_OR_FOLLOWER`` or ``UNKNOWN_TOPIC_OR_PARTITION`` would cost; an idempotent producer retries the batch
with its sequence number, so nothing is duplicated or lost. ``THROTTLING_QUOTA_EXCEEDED`` is KIP-599's, for the
admin APIs: no broker answers a Produce with it, so no client's handling of it there can be relied on. The
partition's ``error_message`` (Produce v8+) names the topic quota. The proxy answers a Produce it holds back
(KIP-936's hold, a volume at PAUSE) with ``NOT_ENOUGH_REPLICAS`` too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from proxy.apis.plan import AnswerLocally, ForwardRequest, Outcome
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.usage import Usage
from proxy.codec.apis import PRODUCE
from proxy.codec.error_codes import NONE, NOT_ENOUGH_REPLICAS
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_response, encode_request, encode_response
from proxy.codec.primitives import ZERO_UUID
from proxy.codec.responses import encode_local_response, error_response
from quota.primitives.decision import Throttle

Refused = list[tuple[Message, Message]]  # (a topic item of the request, one of its partitions)


def reason(topics: Sequence[str], partitions: Sequence[str] = ()) -> str:
    """The refused partitions' ``error_message``: which quotas refused (``partitions``: labels, ``orders/3``)."""
    over = [f"the topic producer_byte_rate of {', '.join(sorted(set(topics)))}"] if topics else []
    if partitions:
        over.append(f"the partition producer_byte_rate of {', '.join(sorted(set(partitions)))}")
    return f"over {' and '.join(over)} (on_exceed: reject): nothing of this partition was written; retry"


def _key(item: Message) -> Hashable:
    """How a topic is named in the request and its answer: by name, or by id from v13 (KIP-516)."""
    topic_id = getattr(item, "topic_id", None)
    key: Hashable = topic_id if topic_id is not None and topic_id != ZERO_UUID else item.name
    return key


def refuse_partitions(
    header: RequestHeader, msg: Message, refused: Refused, message: str, throttle: Throttle | None, usage: Usage
) -> Outcome:
    """``msg`` (the decoded Produce, changed here) with the ``refused`` partitions answered by the proxy."""
    version = header.api_version
    errors: dict[Hashable, int] = {(_key(item), p.index): NOT_ENOUGH_REPLICAS for item, p in refused}
    ours = error_response(PRODUCE, version, msg, NONE, item_errors=errors, error_message=message)
    if len(refused) == sum(len(item.partition_data) for item in msg.topic_data):
        if throttle is not None:
            ours.throttle_time_ms = throttle.throttle_time_ms
        frame = encode_local_response(PRODUCE, version, header.correlation_id, ours)
        return AnswerLocally(frame, throttle=throttle, usage=usage)
    gone = {(id(item), id(p)) for item, p in refused}
    kept = []
    for item in msg.topic_data:
        item.partition_data = [p for p in item.partition_data if (id(item), id(p)) not in gone]
        if item.partition_data:
            kept.append(item)
    msg.topic_data = kept
    # each refused partition's result, by topic, in the client's order
    mine: dict[Hashable, tuple[Message, list[Message]]] = {}
    for topic in ours.responses:
        results = [r for r in topic.partition_responses if r.error_code != NONE]
        if results:
            mine[_key(topic)] = (topic, results)

    def merge(body: memoryview) -> bytes:
        response = decode_response(PRODUCE, version, body)
        left = dict(mine)
        for topic in response.responses:
            found = left.pop(_key(topic), None)
            if found is not None:
                topic.partition_responses = list(topic.partition_responses) + found[1]
        for topic, results in left.values():  # topics every partition of which was refused
            topic.partition_responses = results
            response.responses = list(response.responses) + [topic]
        return encode_response(PRODUCE, version, response)

    return ForwardRequest(
        body=encode_request(PRODUCE, version, msg), leg=ResponseLeg(rewrite=merge), throttle=throttle, usage=usage
    )
