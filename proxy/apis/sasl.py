"""SaslHandshake (17) and SaslAuthenticate (36): forwarded unchanged; read to learn the principal (:mod:`proxy.session.sasl`)."""

from __future__ import annotations

from proxy.apis.plan import FORWARD_AS_IS, ConnectionScope, Plan
from proxy.session.session import Session
from proxy.codec.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.error_codes import NONE
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, decode_response
from proxy.session.sasl import SaslExchange


def exchange(session: Session) -> SaslExchange:
    if session.sasl is None:
        session.sasl = SaslExchange()
    return session.sasl


def plan_handshake(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version = header.api_version
    sasl = exchange(session)
    asked: list[str] = []  # the mechanism this request asks for, carried to this request's own answer

    def decide(body: memoryview):
        asked.append(decode_request(SASL_HANDSHAKE, version, body).mechanism)
        return FORWARD_AS_IS

    def answered(body: memoryview) -> None:
        sasl.handshake_answered(asked[0], version, decode_response(SASL_HANDSHAKE, version, body).error_code)

    return Plan(action=BUFFER, decide=decide, observe=answered)


def plan_authenticate(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version = header.api_version
    sasl = exchange(session)
    token: list[bytes] = []  # this request's token, judged only with this request's own answer

    def decide(body: memoryview):
        token.append(bytes(decode_request(SASL_AUTHENTICATE, version, body).auth_bytes or b""))
        return FORWARD_AS_IS

    def answered(body: memoryview) -> None:
        msg = decode_response(SASL_AUTHENTICATE, version, body)
        if sasl.answered(token[0], bytes(msg.auth_bytes or b""), ok=msg.error_code == NONE):
            session.authenticated(sasl.principal)

    return Plan(action=BUFFER, decide=decide, observe=answered)
