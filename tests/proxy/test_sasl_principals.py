"""Principals learnt from SASL tokens (PLAIN, SCRAM, OAUTHBEARER), only once the broker says yes."""

import base64
import json

import pytest

from proxy.codec.errors import ProtocolError
from proxy.sasl import SaslExchange, oauthbearer_subject, plain_user, scram_user


def jwt(claims: dict) -> str:
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def test_token_parsers():
    assert plain_user(b"\x00alice\x00pw") == "alice"
    assert plain_user(b"alice\x00alice\x00pw") == "alice"
    assert plain_user(b"mallory\x00alice\x00pw") is None  # Kafka refuses another authzid
    assert plain_user(b"no-separators") is None
    assert scram_user(b"n,,n=bob=2Cjr=3Dx,r=abc") == "bob,jr=x"
    assert scram_user(b"n,a=bob,n=bob,r=abc") == "bob"
    assert scram_user(b"garbage") is None
    token = f"n,,\x01auth=Bearer {jwt({'sub': 'svc-etl', 'exp': 1})}\x01\x01".encode()
    assert oauthbearer_subject(token) == "svc-etl"
    assert oauthbearer_subject(b"n,,\x01auth=Bearer not.a-jwt\x01\x01") is None
    assert plain_user(b"\x00" + b"a" * 2000 + b"\x00pw") is None  # a principal too long to believe


def test_the_principal_is_taken_only_when_the_broker_accepts():
    sasl = SaslExchange()
    sasl.handshake("SCRAM-SHA-256")
    sasl.client_token(b"n,,n=bob,r=abc")
    assert sasl.server_token(b"r=abcdef,s=c2FsdA==,i=4096") is None  # server-first: not yet
    sasl.client_token(b"c=biws,r=abcdef,p=cHJvb2Y=")
    assert sasl.server_token(b"v=c2lnbmF0dXJl") == "bob"
    sasl.handshake("PLAIN")  # re-authentication (KIP-368) as someone else
    sasl.client_token(b"\x00carol\x00pw")
    assert sasl.server_token(b"", ok=False) is None and sasl.principal == "bob"
    sasl.handshake("PLAIN")
    sasl.client_token(b"\x00carol\x00pw")
    assert sasl.server_token(b"") == "carol"


def test_saslhandshake_v0_opens_raw_exchanges_per_mechanism_and_refuses_gssapi():
    sasl = SaslExchange()
    sasl.handshake("SCRAM-SHA-512")
    sasl.handshake_answered(0, 0)
    assert (sasl.raw_requests, sasl.raw_responses) == (2, 2)
    sasl.handshake("PLAIN")
    sasl.handshake_answered(1, 0)  # v1: SaslAuthenticate follows, no raw tokens
    sasl.handshake_answered(0, 33)  # refused: no raw tokens either
    assert (sasl.raw_requests, sasl.raw_responses) == (2, 2)
    sasl.handshake("GSSAPI")
    with pytest.raises(ProtocolError, match="SaslHandshake v1"):
        sasl.handshake_answered(0, 0)
