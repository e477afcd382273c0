"""Principals learnt from SASL tokens (PLAIN, SCRAM, OAUTHBEARER), only once the broker says yes."""

import base64
import json

import pytest

from proxy.codec.errors import ProtocolError
from proxy.session.sasl import SaslExchange, ScramFirst, oauthbearer_subject, plain_user, scram_first, scram_user


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
    sasl.handshake_answered("SCRAM-SHA-256", 1, 0)
    assert not sasl.answered(b"n,,n=bob,r=abc", b"r=abcdef,s=c2FsdA==,i=4096", ok=True)  # server-first: not yet
    assert sasl.answered(b"c=biws,r=abcdef,p=cHJvb2Y=", b"v=c2lnbmF0dXJl", ok=True)
    assert sasl.principal == "bob" and sasl.complete
    sasl.handshake_answered("PLAIN", 1, 0)  # re-authentication (KIP-368) as someone else
    assert not sasl.answered(b"\x00carol\x00pw", b"", ok=False) and sasl.principal == "bob"
    sasl.handshake_answered("PLAIN", 1, 0)
    assert sasl.answered(b"\x00carol\x00pw", b"", ok=True) and sasl.principal == "carol"


def test_a_token_counts_only_with_its_own_answer():
    """Mallory authenticates, then pipelines a token naming admin with a wrong password: the broker refuses the
    second (ILLEGAL_SASL_STATE, or SASL_AUTHENTICATION_FAILED); the principal stays mallory."""
    sasl = SaslExchange()
    sasl.handshake_answered("PLAIN", 1, 0)
    mallory, admin = b"\x00mallory\x00right", b"\x00admin\x00wrong"
    assert sasl.answered(mallory, b"", ok=True) and sasl.principal == "mallory"
    assert not sasl.answered(admin, b"", ok=False) and sasl.principal == "mallory"


def test_a_refused_handshake_sets_no_mechanism():
    sasl = SaslExchange()
    sasl.handshake_answered("GSSAPI", 1, 33)  # UNSUPPORTED_SASL_MECHANISM
    assert not sasl.answered(b"\x00alice\x00pw", b"", ok=True) and sasl.principal is None and not sasl.complete
    sasl.handshake_answered("PLAIN", 1, 0)
    sasl.handshake_answered("SCRAM-SHA-256", 1, 33)  # a refused second handshake leaves PLAIN
    assert sasl.answered(b"\x00alice\x00pw", b"", ok=True) and sasl.principal == "alice"


def test_scram_final_without_an_accepted_first_names_nobody():
    sasl = SaslExchange()
    sasl.handshake_answered("SCRAM-SHA-256", 1, 0)
    assert not sasl.answered(b"n,,n=admin,r=abc", b"", ok=False)  # the first refused
    assert not sasl.answered(b"c=biws,r=abcdef,p=x", b"v=forged", ok=True)  # a success with no accepted first
    assert sasl.principal is None and not sasl.complete
    assert not sasl.answered(b"n,,n=bob,r=abc", b"r=abcdef,s=c2FsdA==,i=4096", ok=True)
    assert not sasl.answered(b"c=biws,r=abcdef,p=x", b"e=invalid-proof", ok=True)
    assert sasl.principal is None


def test_oauthbearer_error_challenge_names_nobody():
    sasl = SaslExchange()
    sasl.handshake_answered("OAUTHBEARER", 1, 0)
    token = f"n,,\x01auth=Bearer {jwt({'sub': 'svc-etl'})}\x01\x01".encode()
    assert not sasl.answered(token, b'{"status":"invalid_token"}', ok=True)
    assert not sasl.answered(b"\x01", b"", ok=False)
    assert sasl.principal is None
    assert sasl.answered(token, b"", ok=True) and sasl.principal == "svc-etl"


def test_raw_tokens_are_answered_in_order():
    sasl = SaslExchange()
    sasl.handshake_answered("SCRAM-SHA-256", 0, 0)
    sasl.raw_request(b"n,,n=bob,r=abc")
    sasl.raw_request(b"c=biws,r=abcdef,p=x")  # pipelined before the first answer
    assert not sasl.raw_response(b"r=abcdef,s=c2FsdA==,i=4096")
    assert sasl.raw_response(b"v=sig") and sasl.principal == "bob"
    with pytest.raises(ProtocolError):
        sasl.raw_response(b"v=again")


def test_saslhandshake_v0_opens_raw_exchanges_per_mechanism_and_refuses_gssapi():
    sasl = SaslExchange()
    sasl.handshake_answered("SCRAM-SHA-512", 0, 0)
    assert (sasl.raw_requests, sasl.raw_responses) == (2, 2)
    sasl.handshake_answered("PLAIN", 1, 0)  # v1: SaslAuthenticate follows, no raw tokens
    sasl.handshake_answered("PLAIN", 0, 33)  # refused: no raw tokens either
    assert (sasl.raw_requests, sasl.raw_responses) == (2, 2)
    with pytest.raises(ProtocolError, match="SaslHandshake v1"):
        sasl.handshake_answered("GSSAPI", 0, 0)


# -- delegation tokens (SCRAM with tokenauth=true): Kafka authenticates the token's OWNER --------------------------

SERVER_FIRST = b"r=abcdef,s=c2FsdA==,i=4096"
CLIENT_FINAL = b"c=biws,r=abcdef,p=cHJvb2Y="
SERVER_FINAL = b"v=c2lnbmF0dXJl"


def test_scram_first_reads_the_name_and_tokenauth_as_kafka_does():
    """Kafka's ClientFirstMessage pattern and ScramExtensions: extensions follow the nonce, the last tokenauth given
    wins (Utils.parseMap into a HashMap), and Boolean.parseBoolean takes "true" in any case."""
    assert scram_first(b"n,,n=tok1,r=abc,tokenauth=true") == ScramFirst("tok1", True)
    assert scram_first(b"n,,n=tok1,r=abc,tokenauth=TRUE") == ScramFirst("tok1", True)
    assert scram_first(b"n,,n=tok1,r=abc,tokenauth=yes") == ScramFirst("tok1", False)
    assert scram_first(b"n,,n=tok1,r=abc,tokenauth=true,tokenauth=false") == ScramFirst("tok1", False)
    assert scram_first(b"n,,n=tok1,r=abc,tokenauth=false,x=1,tokenauth=True") == ScramFirst("tok1", True)
    assert scram_first(b"n,,n=tok1,r=abc,TokenAuth=true") == ScramFirst("tok1", False)  # keys are exact
    assert scram_first(b"n,,n=carol,r=abc") == ScramFirst("carol", False)
    assert scram_first(b"n,,m=x,n=carol,r=abc") == ScramFirst("carol", False)  # the reserved m= attribute
    # what Kafka refuses to parse names nobody (the broker fails the login)
    assert scram_first(b"n,,n=tok1,r=abc,tokenauth") is None
    assert scram_first(b"y,,n=tok1,r=abc,tokenauth=true") is None  # Kafka supports gs2 header "n" only
    assert scram_first(b"n,,r=abc,n=tok1,tokenauth=true") is None
    assert scram_first("n,,n=t\u00e9,r=abc".encode()) is None  # ASCII only


def test_a_delegation_token_login_names_its_owner_never_its_id():
    """The SCRAM name of a token login is the token id; Kafka authenticates the token's owner. A success whose
    owner the proxy has not learnt names nobody (never the token id); once learnt, the owner is the principal."""
    sasl = SaslExchange()
    sasl.handshake_answered("SCRAM-SHA-512", 1, 0)
    assert not sasl.answered(b"n,,n=tok1,r=abc,tokenauth=true", SERVER_FIRST, ok=True)
    assert sasl.token_id == "tok1"
    assert not sasl.answered(CLIENT_FINAL, SERVER_FINAL, ok=True)  # the broker said yes: still nobody
    assert sasl.principal is None and not sasl.complete
    sasl.handshake_answered("SCRAM-SHA-512", 1, 0)
    assert not sasl.answered(b"n,,n=tok1,r=abc,tokenauth=true", SERVER_FIRST, ok=True)
    sasl.owner_learnt("tok1", "carol")
    assert sasl.answered(CLIENT_FINAL, SERVER_FINAL, ok=True)
    assert sasl.principal == "carol" and sasl.complete and sasl.token_id is None


def test_an_owner_learnt_for_another_token_or_login_is_not_taken():
    sasl = SaslExchange()
    sasl.handshake_answered("SCRAM-SHA-512", 1, 0)
    assert not sasl.answered(b"n,,n=tok1,r=abc,tokenauth=true", SERVER_FIRST, ok=True)
    sasl.owner_learnt("tok2", "dave")  # not the token of this login
    assert not sasl.answered(CLIENT_FINAL, SERVER_FINAL, ok=True) and sasl.principal is None
    # an owner learnt for a login that then failed does not carry over to the next login with another token
    assert not sasl.answered(b"n,,n=tok1,r=abc,tokenauth=true", SERVER_FIRST, ok=True)
    sasl.owner_learnt("tok1", "carol")
    assert not sasl.answered(CLIENT_FINAL, b"e=invalid-proof", ok=True)
    assert not sasl.answered(b"n,,n=tok3,r=abc,tokenauth=true", SERVER_FIRST, ok=True)
    assert not sasl.answered(CLIENT_FINAL, SERVER_FINAL, ok=True) and sasl.principal is None
    # a user login (no tokenauth) is its user, as before
    assert not sasl.answered(b"n,,n=carol,r=abc,tokenauth=false", SERVER_FIRST, ok=True)
    assert sasl.token_id is None
    assert sasl.answered(CLIENT_FINAL, SERVER_FINAL, ok=True) and sasl.principal == "carol"


def test_a_login_the_proxy_refused_names_nobody_whatever_follows():
    """The proxy answered the client-final itself (owner unknown); a client-final sent again and accepted by the
    broker names nobody."""
    sasl = SaslExchange()
    sasl.handshake_answered("SCRAM-SHA-512", 1, 0)
    assert not sasl.answered(b"n,,n=tok1,r=abc,tokenauth=true", SERVER_FIRST, ok=True)
    sasl.refused()
    assert sasl.token_id is None
    assert not sasl.answered(CLIENT_FINAL, SERVER_FINAL, ok=True) and sasl.principal is None
