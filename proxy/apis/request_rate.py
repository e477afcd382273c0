"""The request-rate quotas' stage (``request_rate``, :mod:`quota.managers.request_rate`): each request of an API
``quota.request.rate.apis`` lists counts one against its client's entity at its header, and, when it names a
consumer group (JoinGroup, SyncGroup, OffsetCommit, TxnOffsetCommit, FindCoordinator for a group), one against each
group it names once its body is read. Over quota the request still goes to the broker (as Kafka's request quota lets
it); its response carries the longest throttle in ``throttle_time_ms`` and the connection is muted for it, so a
client that ignores the throttle (librdkafka, aiokafka) is held all the same.

The stage comes last in its chains: a request an earlier stage settles at its header (a Produce refused at volume
PAUSE or for its producer ids, the proxy's own writes) is not counted; one refused once its body is read is. Heartbeat and LeaveGroup are never counted (:mod:`config.request_rate`). A group's body is
read only while a group quota is configured and the API names a group; otherwise the request streams.
"""

from __future__ import annotations

import dataclasses

from proxy.apis.decisions import Decisions
from proxy.apis.plan import ConnectionScope, ForwardRequest, Plan
from proxy.apis.usage import Usage
from proxy.codec.apis import FIND_COORDINATOR, JOIN_GROUP, OFFSET_COMMIT, SYNC_GROUP, TXN_OFFSET_COMMIT
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request
from proxy.session.session import Session
from quota.primitives.decision import Throttle
from quota.primitives.entity import REQUEST_RATE
from quota.primitives.group_quotas import GROUP_REQUEST_RATE

# the APIs the proxy decodes whose requests name a consumer group (by its group_id, or FindCoordinator's key)
NAMES_A_GROUP = frozenset((JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT, TXN_OFFSET_COMMIT, FIND_COORDINATOR))
_GROUP_KEY = 0  # FindCoordinatorRequest KeyType: 0 a group, 1 a transaction, 2 a share group
_NAMED = 120  # at most this much of a group id in the name of the quota that throttled (explain shows it)


def plan_request_rate(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """The request counted against its client's ``request_rate`` now, and against its group's once its body is
    read; None when no request-rate quota counts it, or nothing was decided."""
    rates = scope.quotas.requests
    if header.api_key not in rates.counted:
        return None
    decisions = Decisions()
    decisions.add(REQUEST_RATE, rates.record_client(session.user, header.client_id or ""), header.client_id)
    plan = decisions.plan()
    if not rates.groups.enabled or header.api_key not in NAMES_A_GROUP:
        return plan

    def decide(body: memoryview) -> ForwardRequest:
        found = Decisions()
        counted: list[tuple[str, int]] = []
        for group in named_groups(header, body):
            label = rates.group_label(group)
            if label is not None:
                counted.append((label, 1))
            decision = rates.record_group(group)
            if isinstance(decision, Throttle):
                named = group if len(group) <= _NAMED else group[: _NAMED - 3] + "..."  # a client's string
                decision = dataclasses.replace(decision, by=f"{GROUP_REQUEST_RATE} (group {named})")
            found.add(GROUP_REQUEST_RATE, decision, header.client_id)
        return ForwardRequest(throttle=found.throttle, usage=found.usage + Usage(group_requests=tuple(counted)))

    grouped = Plan(action=BUFFER, decide=decide)
    return grouped if plan is None else plan.then(grouped, header)


def named_groups(header: RequestHeader, body: memoryview) -> list[str]:
    """The groups a request of :data:`NAMES_A_GROUP` names, each once (FindCoordinator v4+ may ask for several)."""
    msg = decode_request(header.api_key, header.api_version, body)
    if header.api_key != FIND_COORDINATOR:
        return [msg.group_id] if msg.group_id else []
    if msg.key_type != _GROUP_KEY:
        return []
    keys = list(msg.coordinator_keys) if header.api_version >= 4 else [msg.key]
    return list(dict.fromkeys(key for key in keys if key))
