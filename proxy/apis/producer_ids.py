"""InitProducerId (KIP-936 attribution): who is churning producers.

The producer-id quota counts on Produce, as the KIP specifies. InitProducerId answers are decoded (only while a
``producer_ids_rate`` is configured) to attribute each producer id the broker issues to the (user, client-id, IP)
that asked for it, for the ``producer_ids_issued_total`` metric. The response goes to the client unchanged.
"""

from __future__ import annotations

from proxy.apis.plan import PASS, ConnectionScope, Plan
from proxy.session.session import Session
from proxy.codec.apis import INIT_PRODUCER_ID
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_response


def plan_init_producer_id(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    quota = scope.quotas.producer_ids
    if not quota.enabled:
        return PASS
    version, client_id = header.api_version, header.client_id or ""

    def attribute(body: memoryview) -> None:
        msg = decode_response(INIT_PRODUCER_ID, version, body)
        if msg.error_code == 0 and msg.producer_id >= 0:
            quota.issued.record(session.user, client_id, session.peer_ip)

    return Plan(observe=attribute)
