"""SASL pass-through: learn a connection's principal from the authentication the broker accepts.

The proxy forwards SaslHandshake and SaslAuthenticate (and, after SaslHandshake v0, the raw tokens that follow
without Kafka headers) unchanged; it only reads them. A principal is learnt from the client's token and takes effect
only when the broker's answer says the authentication succeeded:

- PLAIN: ``authzid \\0 user \\0 password`` gives ``user`` (Kafka accepts an authzid only when it equals the user);
  the password is never kept, logged or counted.
- SCRAM-SHA-256/512: ``n=`` of the client-first message (``=2C`` and ``=3D`` unescaped); success is the server-final
  message ``v=...`` (``e=...`` is a failure).
- OAUTHBEARER: the ``sub`` claim of the bearer token (a JWT), read WITHOUT verifying its signature: the broker has
  verified the token when it answers success, and the proxy only names the quota entity after that.

Re-authentication (KIP-368, a new SaslHandshake v1 + SaslAuthenticate on a live connection) updates the principal.
SaslHandshake v0 switches the connection to raw tokens (size-prefixed, no Kafka header, no correlation id) for the
exchanges of the mechanism (PLAIN and OAUTHBEARER one, SCRAM two); the proxy cannot follow raw GSSAPI (Kerberos
tokens do not say when the exchange ends), so that combination closes the connection with a clear error: every
client since Kafka 1.0 uses SaslHandshake v1. Pure: no sockets, no clock.
"""

from __future__ import annotations

import base64
import json

from proxy.codec.errors import ProtocolError

PLAIN, OAUTHBEARER = "PLAIN", "OAUTHBEARER"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
RAW_EXCHANGES = {PLAIN: 1, OAUTHBEARER: 1, SCRAM[0]: 2, SCRAM[1]: 2}
MAX_NAME = 1024  # a principal name longer than this is not believed (it names a quota entity and metric labels)


class SaslExchange:
    """One connection's SASL state, fed with the tokens both sides send."""

    __slots__ = ("mechanism", "raw_requests", "raw_responses", "_pending", "_server_tokens", "principal")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.raw_requests = 0  # raw token frames still to come from the client (after SaslHandshake v0)
        self.raw_responses = 0  # raw token frames still to come from the broker
        self._pending: str | None = None  # the user the client's token names, until the broker says yes
        self._server_tokens = 0
        self.principal: str | None = None  # the last principal the broker accepted

    # -- the handshake ------------------------------------------------------------------------------------------

    def handshake(self, mechanism: str) -> None:
        """A SaslHandshake request (a new authentication, or a re-authentication)."""
        self.mechanism = mechanism
        self._pending = None
        self._server_tokens = 0

    def handshake_answered(self, version: int, error_code: int) -> None:
        """The broker answered the handshake: after a successful v0, raw tokens follow in both directions."""
        if error_code != 0 or version > 0:
            return
        exchanges = RAW_EXCHANGES.get(self.mechanism or "")
        if exchanges is None:
            raise ProtocolError(f"SaslHandshake v0 with mechanism {self.mechanism!r}: the proxy cannot follow its raw "
                                "tokens; use SaslHandshake v1 (every Kafka client since 1.0)")
        self.raw_requests = self.raw_responses = exchanges

    # -- tokens ---------------------------------------------------------------------------------------------------

    def client_token(self, token: bytes) -> None:
        """What the client sent (SaslAuthenticate auth_bytes, or a raw token)."""
        mechanism = self.mechanism
        if mechanism == PLAIN:
            self._pending = plain_user(token)
        elif mechanism in SCRAM:
            if self._pending is None:  # the client-first message; the client-final one says nothing more
                self._pending = scram_user(token)
        elif mechanism == OAUTHBEARER:
            if self._pending is None:
                self._pending = oauthbearer_subject(token)

    def server_token(self, token: bytes, ok: bool = True) -> str | None:
        """What the broker answered (``ok``: SaslAuthenticate's error_code was 0; raw tokens have no error code).
        Returns the principal when this answer completes a successful authentication, else None."""
        self._server_tokens += 1
        if not ok:
            self._pending = None
            return None
        mechanism = self.mechanism
        done = False
        if mechanism in (PLAIN, OAUTHBEARER):
            done = True if mechanism == PLAIN else not token  # OAUTHBEARER: an error is a JSON token, success empty
        elif mechanism in SCRAM:
            done = token.startswith(b"v=")  # the server-final message; "e=..." is an error
        if done and self._pending:
            self.principal, self._pending = self._pending, None
            return self.principal
        return None

    def raw_request_seen(self) -> None:
        if self.raw_requests <= 0:
            raise ProtocolError("a raw SASL token with no SaslHandshake v0 exchange open")
        self.raw_requests -= 1

    def raw_response_seen(self) -> None:
        if self.raw_responses <= 0:
            raise ProtocolError("a raw SASL response with no SaslHandshake v0 exchange open")
        self.raw_responses -= 1


def _name(text: str) -> str | None:
    return text if 0 < len(text) <= MAX_NAME else None


def plain_user(token: bytes) -> str | None:
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return None
    authzid, user = parts[0].decode("utf-8", "replace"), parts[1].decode("utf-8", "replace")
    if authzid and authzid != user:
        return None  # Kafka refuses an authzid other than the user
    return _name(user)


def _gs2_body(message: str) -> str | None:
    """The message after its GS2 header ``n,[a=authzid],``."""
    parts = message.split(",", 2)
    if len(parts) < 3 or parts[0] not in ("n", "y", "p") and not parts[0].startswith("p="):
        return None
    return parts[2]


def scram_user(token: bytes) -> str | None:
    body = _gs2_body(token.decode("utf-8", "replace"))
    if body is None:
        return None
    for attribute in body.split(","):
        if attribute.startswith("n="):
            return _name(attribute[2:].replace("=2C", ",").replace("=3D", "="))
    return None


def oauthbearer_subject(token: bytes, claim: str = "sub") -> str | None:
    body = _gs2_body(token.decode("utf-8", "replace"))
    if body is None:
        return None
    for kv in body.split("\x01"):
        if kv.startswith("auth="):
            scheme, _, jwt = kv[5:].partition(" ")
            if scheme.lower() != "bearer":
                return None
            parts = jwt.split(".")
            if len(parts) < 2:
                return None
            try:
                payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
            except (ValueError, UnicodeDecodeError):
                return None
            value = payload.get(claim) if isinstance(payload, dict) else None
            return _name(value) if isinstance(value, str) else None
    return None
