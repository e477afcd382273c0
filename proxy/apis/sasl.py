"""SaslHandshake (17) and SaslAuthenticate (36): forwarded unchanged; read to learn the principal (:mod:`proxy.sasl`)."""

from __future__ import annotations

from proxy.apis.plan import FORWARD_AS_IS, ConnectionScope, Plan, Session
from proxy.codec.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, decode_response
from proxy.sasl import SaslExchange


def exchange(session: Session) -> SaslExchange:
    if session.sasl is None:
        session.sasl = SaslExchange()
    return session.sasl


def plan_handshake(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version = header.api_version
    sasl = exchange(session)

    def decide(body: memoryview):
        sasl.handshake(decode_request(SASL_HANDSHAKE, version, body).mechanism)
        return FORWARD_AS_IS

    def answered(body: memoryview) -> None:
        sasl.handshake_answered(version, decode_response(SASL_HANDSHAKE, version, body).error_code)
        return None  # the answer goes back unchanged

    return Plan(action=BUFFER, decide=decide, rewrite=answered)


def plan_authenticate(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version = header.api_version
    sasl = exchange(session)

    def decide(body: memoryview):
        sasl.client_token(bytes(decode_request(SASL_AUTHENTICATE, version, body).auth_bytes or b""))
        return FORWARD_AS_IS

    def answered(body: memoryview) -> None:
        msg = decode_response(SASL_AUTHENTICATE, version, body)
        principal = sasl.server_token(bytes(msg.auth_bytes or b""), ok=msg.error_code == 0)
        if principal is not None:
            session.authenticated(principal)
        return None

    return Plan(action=BUFFER, decide=decide, rewrite=answered)
