"""InitProducerId at a volume's PAUSE: a transactional id new to its coordinator waits; a known one is re-initialised.

InitProducerId with a transactional id makes the transaction coordinator write the id's record (producer id, epoch,
timeout, state) to ``__transaction_state``; for an id it has never seen (or has expired) the record is a new key there
and a new entry in the coordinator's memory, kept until ``transactional.id.expiration.ms`` (7 days by default). At
PAUSE:

- **a transactional id the coordinator does not know** is refused: answered ``COORDINATOR_NOT_AVAILABLE``, what the
  coordinator itself answers when it cannot write ``__transaction_state``, so every client looks the coordinator up
  again and retries (Java's ``initTransactions()`` until ``max.block.ms``, librdkafka's ``init_transactions()`` until
  its timeout, both retriable). A new transactional producer starts when the PAUSE ends. Nothing it could do before
  then would reach the disk anyway: no partition joins a transaction at PAUSE and every produce is refused.
- **a transactional id the coordinator knows** is forwarded: re-initialising it is how a restarted application
  fences its zombie (the old instance's epoch is bumped, its writes refused) and how an ongoing transaction left
  behind is aborted, so that ``read_committed`` consumers are not held back by it. It rewrites the id's one record
  (the topic is compacted) and writes abort markers to the partitions that joined the transaction before the PAUSE,
  and it is charged.
- an InitProducerId without a transactional id (an idempotent producer) goes on: the broker writes nothing for it
  (the producer id comes from a block the controller handed out); ``producer_ids_rate`` (KIP-936) applies to the ids
  it then produces with.

Which is which the coordinator says: before deciding, the proxy asks the broker, on the client's own connection and
in the client's name, ``DescribeTransactions`` for the id (Kafka 3.0+; ``TRANSACTIONAL_ID_NOT_FOUND`` for an unknown
one). The client sent InitProducerId to the id's coordinator, so the same broker answers both, and the ``Write``
permission InitProducerId needs implies the ``Describe`` the lookup needs. Any other answer (not the coordinator, still
loading, not authorized) forwards the request: the broker then answers it as it would have. A broker that does not
serve DescribeTransactions cannot tell, and at PAUSE the disk comes first: the id is refused as a new one.

Every InitProducerId is charged at its header as the other writes are (:func:`proxy.apis.broker_writes.charged`); a
refusal also carries the pause itself and is counted (``volume_refused_writes_total{api="InitProducerId"}``).
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.apis.api_versions import knowing_broker_versions
from proxy.apis.broker_writes import PAUSED_MESSAGE, charged, counted_refusal, paused, refusal_throttle
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, ConnectionScope, LookUp, Outcome, Plan
from proxy.codec.apis import DESCRIBE_TRANSACTIONS, INIT_PRODUCER_ID
from proxy.codec.error_codes import COORDINATOR_NOT_AVAILABLE, TRANSACTIONAL_ID_NOT_FOUND
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, new_request
from proxy.session.session import Session

LOOKUP_VERSION = 0  # DescribeTransactions' only version (Kafka 3.0 to 4.x)


def plan_init_producer_id(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    """Charged; at PAUSE, one with a transactional id is read whole and its id looked up first."""
    quotas = scope.quotas
    charge = charged(quotas, session, header)
    plan = charge.plan() or PASS
    if not paused(quotas):
        return plan

    def refuse(msg: Message) -> Outcome:
        counted_refusal(quotas, INIT_PRODUCER_ID)
        throttle = refusal_throttle(quotas, header, charge)
        what = "a new transactional id"
        return AnswerLocally.failing(header, msg, COORDINATOR_NOT_AVAILABLE, throttle, PAUSED_MESSAGE.format(what=what))

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(INIT_PRODUCER_ID, header.api_version, body)
        if msg.transactional_id is None:
            return FORWARD_AS_IS
        return knowing_broker_versions(session, lambda: _look_up(session, header, msg, refuse))

    return plan.then(Plan(action=BUFFER, decide=decide), header)


def _look_up(session: Session, header: RequestHeader, msg: Message, refuse: Callable[[Message], Outcome]) -> Outcome:
    """DescribeTransactions for the request's id: unknown to the coordinator, ``refuse``; otherwise forwarded."""
    served = (session.broker_lookup_versions or {}).get(DESCRIBE_TRANSACTIONS)
    if served is None or not served[0] <= LOOKUP_VERSION <= served[1]:
        return refuse(msg)  # cannot tell a new id from a known one: the disk comes first
    request = new_request(DESCRIBE_TRANSACTIONS, LOOKUP_VERSION, transactional_ids=[msg.transactional_id])

    def answered(reply: memoryview) -> Outcome:
        states = decode_response(DESCRIBE_TRANSACTIONS, LOOKUP_VERSION, reply).transaction_states
        if any(s.error_code == TRANSACTIONAL_ID_NOT_FOUND for s in states):
            return refuse(msg)
        return FORWARD_AS_IS

    body = encode_request(DESCRIBE_TRANSACTIONS, LOOKUP_VERSION, request)
    return LookUp(DESCRIBE_TRANSACTIONS, LOOKUP_VERSION, body, answered, client_id=header.client_id)
