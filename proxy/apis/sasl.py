"""SaslHandshake (17) and SaslAuthenticate (36): forwarded unchanged; read to learn the principal
(:mod:`proxy.session.sasl`).

A SCRAM login with a delegation token (``tokenauth=true``) authenticates the token's owner, as Kafka does: before
its client-final message goes to the broker, the owner is taken from what the proxy knows or looked up
(:mod:`proxy.cluster.token_owners`; the login waits meanwhile). A login whose owner cannot be learnt is refused
by the proxy itself with SASL_AUTHENTICATION_FAILED saying why, its final message never forwarded, so the broker
never authenticates that connection: a token is never charged to its id, nor to anyone but its owner.
"""

from __future__ import annotations

from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, Await, ConnectionScope, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.cluster.token_owners import OwnerUnknown
from proxy.codec.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.error_codes import NONE, SASL_AUTHENTICATION_FAILED
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, decode_response
from proxy.codec.schema import Message
from proxy.session.sasl import SaslExchange
from proxy.session.session import Session
from quota.primitives.decision import Throttle

NO_THROTTLE = Throttle(0, 0)


def exchange(session: Session) -> SaslExchange:
    if session.sasl is None:
        session.sasl = SaslExchange()
    return session.sasl


def plan_handshake(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version = header.api_version
    sasl = exchange(session)
    asked: list[str] = []  # the mechanism this request asks for, carried to this request's own answer

    def decide(body: memoryview) -> Outcome:
        asked.append(decode_request(SASL_HANDSHAKE, version, body).mechanism)
        return FORWARD_AS_IS

    def answered(body: memoryview) -> None:
        sasl.handshake_answered(asked[0], version, decode_response(SASL_HANDSHAKE, version, body).error_code)

    return Plan(action=BUFFER, decide=decide, leg=ResponseLeg(observe=answered))


def plan_authenticate(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version = header.api_version
    sasl = exchange(session)
    token: list[bytes] = []  # this request's token, judged only with this request's own answer

    def decide(body: memoryview) -> Outcome:
        request = decode_request(SASL_AUTHENTICATE, version, body)
        token.append(bytes(request.auth_bytes or b""))
        token_id = sasl.token_id  # a delegation-token login, about to send its client-final message
        if token_id is None:
            return FORWARD_AS_IS
        owner = scope.tokens.owner(token_id)
        if owner is not None:
            sasl.owner_learnt(token_id, owner)
            return FORWARD_AS_IS

        def resolved(result: object) -> Outcome:
            if isinstance(result, str):
                sasl.owner_learnt(token_id, result)
                return FORWARD_AS_IS
            why = result.reason if isinstance(result, OwnerUnknown) else f"{type(result).__name__}: {result}"
            return _refused(scope, session, header, request, token_id, why)

        return Await(start=lambda: scope.tokens.resolve(token_id), then=resolved)

    def answered(body: memoryview) -> None:
        msg = decode_response(SASL_AUTHENTICATE, version, body)
        if sasl.answered(token[0], bytes(msg.auth_bytes or b""), ok=msg.error_code == NONE):
            session.authenticated(sasl.principal)

    return Plan(action=BUFFER, decide=decide, leg=ResponseLeg(observe=answered))


def _refused(
    scope: ConnectionScope, session: Session, header: RequestHeader, request: Message, token_id: str, why: str
) -> AnswerLocally:
    """The login with delegation token ``token_id`` refused by the proxy: its owner could not be learnt (``why``)."""
    scope.tokens.refused_login(session.listener, session.peer_ip, token_id, why)
    exchange(session).refused()  # the exchange is over: nothing it said names anybody
    message = (
        f"kafka-quota-proxy: the owner of delegation token {token_id} could not be learnt ({why}); a token "
        "is charged to its owner, so this login is refused"
    )
    return AnswerLocally.failing(header, request, SASL_AUTHENTICATION_FAILED, NO_THROTTLE, message)
