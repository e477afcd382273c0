"""The proxy's own SASL login (proxy/cluster/sasl_login.py, config ``upstream.sasl``): SCRAM against RFC 7677's
worked example and a server of our own making, PLAIN's one message, and the config's checks."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from config.errors import ConfigError
from config.loader import parse_config
from config.model import UpstreamSasl
from proxy.cluster.sasl_login import SaslLoginError, Scram, exchanges


def test_scram_sha_256_matches_rfc_7677():
    scram = Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert scram.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert scram.final(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    scram.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def server_side(mechanism: str, password: str, client_first: bytes, client_final: bytes, salt: bytes, nonce: str):
    """What a SCRAM server that holds ``password`` checks and answers (RFC 5802), written from the RFC."""
    h = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), salt, 4096)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i=4096"
    without_proof, _, proof = client_final.decode().rpartition(",p=")
    auth = f"{client_first.decode()[3:]},{server_first},{without_proof}".encode()
    signature = hmac.new(h(client_key).digest(), auth, h).digest()
    recovered = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
    ok = h(recovered).digest() == h(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    return ok, b"v=" + base64.b64encode(hmac.new(server_key, auth, h).digest())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_against_a_server_holding_the_password(mechanism):
    steps = exchanges(UpstreamSasl(mechanism, "ca=rol,x", "s3cret"))
    first = next(steps)
    assert first.startswith(b"n,,n=ca=3Drol=2Cx,r=")  # saslname escaping of = and ,
    nonce = first.decode().split("r=", 1)[1] + "SERVER"
    salt = b"0123456789abcdef"
    final = steps.send(f"r={nonce},s={base64.b64encode(salt).decode()},i=4096".encode())
    ok, server_final = server_side(mechanism, "s3cret", first, final, salt, nonce)
    assert ok
    with pytest.raises(StopIteration):
        steps.send(server_final)


def test_scram_refuses_a_server_that_does_not_know_the_password():
    scram = Scram("SCRAM-SHA-512", "carol", "right", nonce="abc")
    client_first = scram.first()
    salt = b"salt-salt-salt"
    final = scram.final(f"r=abcXYZ,s={base64.b64encode(salt).decode()},i=4096".encode())
    _, forged = server_side("SCRAM-SHA-512", "wrong", client_first, final, salt, "abcXYZ")
    with pytest.raises(SaslLoginError, match="signature is wrong"):
        scram.verify(forged)


def test_scram_refuses_a_nonce_that_is_not_an_extension_of_its_own():
    scram = Scram("SCRAM-SHA-256", "u", "p", nonce="mine")
    with pytest.raises(SaslLoginError, match="another nonce"):
        scram.final(b"r=theirs,s=c2FsdA==,i=4096")
    with pytest.raises(SaslLoginError, match="refused the login: invalid-proof"):
        Scram("SCRAM-SHA-256", "u", "p", nonce="n").verify(b"e=invalid-proof")


def test_plain_is_one_message():
    steps = exchanges(UpstreamSasl("PLAIN", "admin", "pw"))
    assert next(steps) == b"\0admin\0pw"
    with pytest.raises(StopIteration):
        steps.send(b"")


def config(sasl) -> dict:
    return {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"], "sasl": sasl},
        "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
    }


def test_config_reads_the_password_from_a_file_and_never_shows_it(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    parsed = parse_config(config({"mechanism": "SCRAM-SHA-512", "username": "svc", "password_file": str(secret)}))
    assert parsed.upstream.sasl == UpstreamSasl("SCRAM-SHA-512", "svc", "from-a-file")
    assert "from-a-file" not in repr(parsed.upstream)


@pytest.mark.parametrize(
    "sasl,key,reason",
    [
        ({"mechanism": "GSSAPI", "username": "u", "password": "p"}, "upstream.sasl.mechanism", "expected one of PLAIN"),
        ({"mechanism": "PLAIN", "username": "", "password": "p"}, "upstream.sasl.username", "non-empty"),
        ({"mechanism": "PLAIN", "username": "u"}, "upstream.sasl", "exactly one of password and password_file"),
        (
            {"mechanism": "PLAIN", "username": "u", "password": "p", "password_file": "/x"},
            "upstream.sasl",
            "exactly one of",
        ),
        (
            {"mechanism": "PLAIN", "username": "u", "password_file": "/nonexistent/pw"},
            "upstream.sasl.password_file",
            "cannot read",
        ),
        ({"mechanism": "PLAIN", "username": "u", "password": "p", "user": "x"}, "upstream.sasl", "user"),
    ],
)
def test_a_bad_sasl_section_names_the_key_and_the_reason(sasl, key, reason):
    with pytest.raises(ConfigError) as error:
        parse_config(config(sasl))
    assert key in str(error.value) and reason in str(error.value), str(error.value)
    assert 'p"' not in str(error.value)
