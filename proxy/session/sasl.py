"""SASL pass-through: learn a connection's principal from the authentication the broker accepts.

The proxy forwards SaslHandshake and SaslAuthenticate (and, after SaslHandshake v0, the raw tokens that follow
without Kafka headers) unchanged; it only reads them. A principal is learnt from the client's token and takes effect
only when the broker's answer to that token says the authentication succeeded:

- PLAIN: ``authzid \\0 user \\0 password`` gives ``user`` (Kafka accepts an authzid only when it equals the user);
  the password is never kept, logged or counted.
- SCRAM-SHA-256/512: ``n=`` of the client-first message (``=2C`` and ``=3D`` unescaped); success is the server-final
  message ``v=...`` (``e=...`` is a failure). A client-first message with the ``tokenauth=true`` extension is a
  delegation-token login: ``n=`` is the token id, and Kafka authenticates the connection as the token's OWNER
  (``ScramSaslServer``: ``authorizationId = tokenOwner``), so the principal is the owner, which the broker's answers
  do not carry: the proxy learns it before the client-final message goes on (:attr:`SaslExchange.token_id`,
  :meth:`SaslExchange.owner_learnt`, by :mod:`proxy.apis.sasl`); a token login whose owner was not learnt names
  nobody, whatever the broker answers.
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
import re
from collections import deque
from typing import NamedTuple

from proxy.codec.error_codes import NONE
from proxy.codec.errors import ProtocolError
from quota.primitives.quota_groups import principal_name

PLAIN, OAUTHBEARER = "PLAIN", "OAUTHBEARER"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
RAW_EXCHANGES = {PLAIN: 1, OAUTHBEARER: 1, SCRAM[0]: 2, SCRAM[1]: 2}
MAX_NAME = 1024  # a principal name longer than this is not believed (it names a quota entity and metric labels)


class SaslExchange:
    """One connection's SASL state, moved only by the broker's answers.

    Each client token is judged together with the broker's answer to that very token: SaslAuthenticate's token is
    carried by the request's own plan to its own response, raw tokens (after SaslHandshake v0) wait in arrival order
    for theirs. A token the broker has not yet answered, or answered with an error, names nobody; a token sent after
    a success (pipelined, or refused by the broker as ILLEGAL_SASL_STATE) changes nothing. The mechanism is the one
    of the last SaslHandshake the broker accepted."""

    __slots__ = (
        "mechanism",
        "raw_requests",
        "raw_responses",
        "_raw_tokens",
        "_first_user",
        "_first_token",
        "_token_owner",
        "principal",
        "complete",
    )

    def __init__(self) -> None:
        self.mechanism: str | None = None  # of the last SaslHandshake the broker accepted
        self.raw_requests = 0  # raw token frames still to come from the client (after SaslHandshake v0)
        self.raw_responses = 0  # raw token frames still to come from the broker
        self._raw_tokens: deque[bytes] = deque()  # raw client tokens not yet answered, oldest first
        self._first_user: str | None = None  # SCRAM: the user of a client-first message the broker went on with
        self._first_token = False  # ... a delegation token's id (tokenauth=true), not a user
        self._token_owner: str | None = None  # the owner of that token, once learnt: the principal its success names
        self.principal: str | None = None  # the last principal the broker accepted
        self.complete = False  # the broker has accepted an authentication on this connection

    # -- the handshake ------------------------------------------------------------------------------------------

    def handshake_answered(self, mechanism: str, version: int, error_code: int) -> None:
        """The broker answered a SaslHandshake for ``mechanism`` (a new authentication, or a re-authentication):
        only an accepted one sets the mechanism; after an accepted v0, raw tokens follow in both directions."""
        self._forget_first()
        if error_code != NONE:
            return
        self.mechanism = mechanism
        if version > 0:
            return
        exchanges = RAW_EXCHANGES.get(mechanism)
        if exchanges is None:
            raise ProtocolError(
                f"SaslHandshake v0 with mechanism {mechanism!r}: the proxy cannot follow its raw "
                "tokens; use SaslHandshake v1 (every Kafka client since 1.0)"
            )
        self.raw_requests = self.raw_responses = exchanges

    # -- tokens ---------------------------------------------------------------------------------------------------

    def answered(self, client: bytes, server: bytes, ok: bool) -> bool:
        """The broker answered the client token ``client`` with ``server`` (``ok``: SaslAuthenticate's error_code
        was 0; raw tokens have none). Returns True when this answer completes a successful authentication; the
        principal it names (None when the mechanism is one the proxy cannot read, e.g. GSSAPI) is then
        :attr:`principal`."""
        if not ok:
            self._forget_first()
            return False
        mechanism = self.mechanism
        user: str | None = None
        if mechanism == PLAIN:
            user = plain_user(client)
        elif mechanism == OAUTHBEARER:
            if server:  # an error, as a JSON challenge; the client's next token is a bare kvsep, then failure
                return False
            user = oauthbearer_subject(client)
        elif mechanism in SCRAM:
            if server.startswith(b"r="):  # the server-first message: the client-first one named the user
                first = scram_first(client)
                self._forget_first()
                if first is not None:
                    self._first_user, self._first_token = first.name, first.token
                return False
            if not server.startswith(b"v=") or self._first_user is None:  # "e=...", or a final with no first
                self._forget_first()
                return False
            # a delegation token authenticates its owner, as Kafka does; an owner not learnt names nobody
            user = self._token_owner if self._first_token else self._first_user
            self._forget_first()
            if user is None:
                return False
        elif mechanism is None:
            return False  # no accepted handshake: nothing was authenticated
        self.principal = user
        self.complete = True
        return True

    @property
    def token_id(self) -> str | None:
        """The delegation token a SCRAM login in progress authenticates with (its client-first message carried
        ``tokenauth=true`` and the broker went on with it), whose owner must be learnt before its client-final
        message is answered; None for any other exchange."""
        return self._first_user if self._first_token else None

    def owner_learnt(self, token_id: str, owner: str) -> None:
        """``owner`` owns delegation token ``token_id``: the principal a success of this login names (nothing
        changes unless ``token_id`` is the token of the login in progress)."""
        if token_id == self.token_id:
            self._token_owner = _name(owner)

    def refused(self) -> None:
        """The proxy refused the login in progress itself (its answer never came from the broker)."""
        self._forget_first()

    def _forget_first(self) -> None:
        self._first_user, self._first_token, self._token_owner = None, False, None

    def raw_request(self, token: bytes) -> None:
        """A raw client token (after SaslHandshake v0), answered later by the next raw response."""
        if self.raw_requests <= 0:
            raise ProtocolError("a raw SASL token with no SaslHandshake v0 exchange open")
        self.raw_requests -= 1
        self._raw_tokens.append(token)

    def raw_response(self, token: bytes) -> bool:
        """The broker's raw answer to the oldest raw client token not yet answered; see :meth:`answered`."""
        if self.raw_responses <= 0 or not self._raw_tokens:
            raise ProtocolError("a raw SASL response with no SaslHandshake v0 exchange open")
        self.raw_responses -= 1
        return self.answered(self._raw_tokens.popleft(), token, ok=True)


def _name(text: str) -> str | None:
    return principal_name(text) if 0 < len(text) <= MAX_NAME else None


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


# Kafka's ScramMessages.ClientFirstMessage, character class for character class: a message it would not parse is
# refused by the broker, so only what Kafka reads is read here (and an extension read the same way it reads it).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # no "," nor "=" but as =2C, =3D
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # no ","
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_CLIENT_FIRST = re.compile(
    f"n,(?:a={_SASLNAME})?,(?:m={_VALUE},)?n=(?P<name>{_SASLNAME}),r={_PRINTABLE}"
    f"(?P<extensions>(?:,[A-Za-z]+={_VALUE})*)"
)
TOKEN_AUTH = "tokenauth"  # ScramLoginModule.TOKEN_AUTH_CONFIG: the extension of a delegation-token login


class ScramFirst(NamedTuple):
    name: str  # the user, or the delegation token's id
    token: bool  # tokenauth=true: a delegation-token login, authenticating the token's owner


def scram_first(token: bytes) -> ScramFirst | None:
    """What a SCRAM client-first message names, as Kafka reads it: ``n=`` (``=2C``/``=3D`` unescaped), and whether
    its extensions make it a delegation-token login (``tokenauth``, the last one given, ``true`` in any case:
    ``Utils.parseMap`` then ``Boolean.parseBoolean``). None when Kafka would refuse the message."""
    match = _CLIENT_FIRST.fullmatch(token.decode("utf-8", "replace"))
    if match is None:
        return None
    name = _name(match["name"].replace("=2C", ",").replace("=3D", "="))
    if name is None:
        return None
    extensions = dict(item.split("=", 1) for item in match["extensions"].split(",")[1:])
    return ScramFirst(name, extensions.get(TOKEN_AUTH, "").lower() == "true")


def scram_user(token: bytes) -> str | None:
    first = scram_first(token)
    return None if first is None else first.name


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
