"""The SASL login of the proxy's own connections to brokers that require it (``upstream.sasl``): PLAIN and
SCRAM-SHA-256/512 (RFC 5802, as Kafka's ScramSaslServer speaks it: no channel binding, ``n,,`` header).

:class:`Scram` is pure (the nonce is passed in); :func:`exchanges` yields the SaslAuthenticate payloads a mechanism
sends, each given the broker's previous answer, so the socket code in :func:`proxy.cluster.kafka_clients.ask` only
carries frames. aiokafka's clients log in by themselves with the same settings (:meth:`OwnKafka.options`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Generator

from config.model import UpstreamSasl


class SaslLoginError(Exception):
    """The broker refused the login, or answered something a correct broker never would (a wrong server signature,
    another nonce)."""


_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: bytes) -> dict[str, str]:
    out = {}
    for part in message.decode("utf-8").split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslLoginError(f"a SCRAM message the broker should not send: {message[:100]!r}")
        out[key] = value
    return out


class Scram:
    """One SCRAM client exchange: ``first()``, then ``final(server_first)``, then ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.hash = _HASHES[mechanism]
        self.username = username
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(24)
        self.first_bare = f"n={_saslname(username)},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attrs = _attributes(server_first)
        if "e" in attrs:
            raise SaslLoginError(f"the broker refused the login: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i")
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce) or salt is None or iterations is None:
            raise SaslLoginError("the broker's first SCRAM message has another nonce or lacks salt or iterations")
        salted = hashlib.pbkdf2_hmac(self.hash().name, self.password.encode(), base64.b64decode(salt), int(iterations))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = self.hash(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final)
        if "e" in attrs:
            raise SaslLoginError(f"the broker refused the login: {attrs['e']}")
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")), self.server_signature):
            raise SaslLoginError("the broker's SCRAM signature is wrong: not the broker that holds the credentials")


def exchanges(sasl: UpstreamSasl) -> Generator[bytes, bytes, None]:
    """The SaslAuthenticate payloads of one login: each ``send`` gives the broker's answer to the previous one."""
    if sasl.mechanism == "PLAIN":
        yield f"\0{sasl.username}\0{sasl.password}".encode()
        return
    scram = Scram(sasl.mechanism, sasl.username, sasl.password)
    server_first = yield scram.first()
    server_final = yield scram.final(server_first)
    scram.verify(server_final)
