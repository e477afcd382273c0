"""Delegation-token logins through the SaslHandshake/SaslAuthenticate handlers, on bytes: a SCRAM login with
``tokenauth=true`` authenticates the token's owner (as Kafka's ScramSaslServer does), learnt before the client-final
message is forwarded; one whose owner cannot be learnt is refused by the proxy, never charged to the token id."""

from __future__ import annotations

import asyncio

from config.loader import parse_config
from proxy.apis import AnswerLocally, Await, ConnectionScope, Session, plan_request
from proxy.apis.plan import FORWARD_AS_IS
from proxy.cluster.token_owners import OwnerUnknown, TokenOwners
from proxy.cluster.topics import Topics
from proxy.codec.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.error_codes import SASL_AUTHENTICATION_FAILED
from proxy.codec.header import RequestHeader, response_header_length
from proxy.codec.messages import decode_response, encode_request, encode_response, new_request, new_response
from proxy.enforcement.proxy_quotas import ProxyQuotas
from tests.fakes import TokenKafka as FakeKafka
from tests.fakes import token_answer as answer

V = 2  # SaslAuthenticate v2, as every Java client since 2.2 sends it
CLIENT_FIRST = b"n,,n=tok-c,r=nonce,tokenauth=true"
SERVER_FIRST = b"r=nonceSERVER,s=c2FsdA==,i=4096"
CLIENT_FINAL = b"c=biws,r=nonceSERVER,p=cHJvb2Y="
SERVER_FINAL = b"v=c2lnbmF0dXJl"


def scope(tokens: TokenOwners) -> ConnectionScope:
    config = parse_config(
        {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "SASL", "bind": "h:2", "sasl": True}]}
    )
    return ConnectionScope(None, Topics(), ProxyQuotas(config).home, tokens=tokens)


def session() -> Session:
    s = Session("SASL", "127.0.0.1")
    s.awaiting_authentication = True
    return s


def handshake(sc: ConnectionScope, s: Session) -> None:
    plan = plan_request(sc, s, RequestHeader(100, SASL_HANDSHAKE, 1, 1, "c", 20, None))
    assert (
        plan.decide(
            memoryview(encode_request(SASL_HANDSHAKE, 1, new_request(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")))
        )
        is FORWARD_AS_IS
    )
    plan.leg.observe(
        memoryview(
            encode_response(
                SASL_HANDSHAKE, 1, new_response(SASL_HANDSHAKE, 1, error_code=0, mechanisms=["SCRAM-SHA-512"])
            )
        )
    )


def authenticate(sc: ConnectionScope, s: Session, corr: int, token: bytes):
    """The plan of one SaslAuthenticate carrying ``token``, and its outcome."""
    plan = plan_request(sc, s, RequestHeader(100, SASL_AUTHENTICATE, V, corr, "c", 20, None))
    body = encode_request(SASL_AUTHENTICATE, V, new_request(SASL_AUTHENTICATE, V, auth_bytes=token))
    return plan, plan.decide(memoryview(body))


def broker_says(plan, server: bytes, error_code: int = 0) -> None:
    plan.leg.observe(
        memoryview(
            encode_response(
                SASL_AUTHENTICATE, V, new_response(SASL_AUTHENTICATE, V, error_code=error_code, auth_bytes=server)
            )
        )
    )


def first_step(sc: ConnectionScope, s: Session) -> None:
    handshake(sc, s)
    plan, outcome = authenticate(sc, s, 2, CLIENT_FIRST)
    assert outcome is FORWARD_AS_IS  # the broker has not said the token exists yet: nothing is looked up
    broker_says(plan, SERVER_FIRST)


def test_a_token_login_is_charged_to_the_tokens_owner_not_its_id():
    """carol's token: once the broker accepts the login, the connection's user (what every quota charges) is
    carol, the owner, as Kafka authenticates it; never the token id the SCRAM exchange names."""
    tokens = TokenOwners(None, 30.0)
    tokens.learn("tok-c", "carol")
    sc, s = scope(tokens), session()
    first_step(sc, s)
    plan, outcome = authenticate(sc, s, 3, CLIENT_FINAL)
    assert outcome is FORWARD_AS_IS  # known: no wait
    broker_says(plan, SERVER_FINAL)
    assert s.user == "carol" and not s.awaiting_authentication


def test_an_owner_not_known_yet_is_looked_up_before_the_client_final_goes_on():
    kafka = FakeKafka(answer({"tok-c": "dave"}))
    tokens = TokenOwners(kafka, 30.0, min_interval_s=0.0)
    sc, s = scope(tokens), session()
    first_step(sc, s)
    plan, outcome = authenticate(sc, s, 3, CLIENT_FINAL)
    assert isinstance(outcome, Await)
    owner = asyncio.run(outcome.start())
    assert owner == "dave" and outcome.then(owner) is FORWARD_AS_IS and len(kafka.asked) == 1
    broker_says(plan, SERVER_FINAL)
    assert s.user == "dave"


def test_a_login_whose_owner_cannot_be_learnt_is_refused_by_the_proxy():
    """The proxy's principal may not describe the token: the client-final is answered SASL_AUTHENTICATION_FAILED
    by the proxy (never forwarded: the broker never authenticates the connection), saying why; counted; the
    connection stays unauthenticated, whatever the broker answers a final sent again."""
    kafka = FakeKafka(answer({}))
    refused = []
    tokens = TokenOwners(kafka, 0.2, min_interval_s=0.05, on_refused=lambda: refused.append(1))
    sc, s = scope(tokens), session()
    first_step(sc, s)
    plan, outcome = authenticate(sc, s, 3, CLIENT_FINAL)
    assert isinstance(outcome, Await)
    result = asyncio.run(outcome.start())  # waits out its 0.2 s bound
    assert isinstance(result, OwnerUnknown)
    local = outcome.then(result)
    assert isinstance(local, AnswerLocally)
    frame = local.frame
    assert frame[4:8] == (3).to_bytes(4, "big")  # the request's own correlation id
    msg = decode_response(
        SASL_AUTHENTICATE, V, memoryview(frame)[response_header_length(SASL_AUTHENTICATE, V, frame) :]
    )
    assert msg.error_code == SASL_AUTHENTICATION_FAILED
    assert "tok-c" in msg.error_message and "may describe" in msg.error_message
    assert refused == [1] and tokens.refused == 1
    plan, outcome = authenticate(sc, s, 4, CLIENT_FINAL)  # sent again, forwarded, and accepted by the broker
    assert outcome is FORWARD_AS_IS
    broker_says(plan, SERVER_FINAL)
    assert s.awaiting_authentication and s.user == "ANONYMOUS"


def test_a_failed_lookup_task_is_a_refusal_too():
    tokens = TokenOwners(None, 30.0)
    sc, s = scope(tokens), session()
    first_step(sc, s)
    plan, outcome = authenticate(sc, s, 3, CLIENT_FINAL)
    local = outcome.then(RuntimeError("boom"))  # what the connection hands then() when start() raised
    assert isinstance(local, AnswerLocally) and tokens.refused == 1
