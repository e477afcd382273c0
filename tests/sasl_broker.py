"""A scripted Kafka broker that authenticates with SASL PLAIN and SCRAM-SHA-256 (RFC 5802, server side), for the
SASL tests: Tansu's SASL cannot be used with memory storage. It answers ApiVersions, SaslHandshake v0/v1 (v0 then
takes raw tokens), SaslAuthenticate, Metadata (itself as the one broker, advertised at the proxy's address, one
partition per topic asked for) and Produce. As Kafka's SaslServerAuthenticator and KafkaApis do: a failed
authentication closes the connection; before an authentication succeeds, any request other than ApiVersions,
SaslHandshake and SaslAuthenticate closes it; after one has, SaslAuthenticate is answered ILLEGAL_SASL_STATE (34)
and the connection stays open. Every request header it reads is kept in ``seen`` (API keys, in order)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct

from proxy.codec.apis import API_VERSIONS, METADATA, PRODUCE, SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.header import RequestHeader, encode_response_header, frame
from proxy.codec.messages import decode_request, encode_response, new_response
from proxy.codec.produce_prefix import parse_request_prefix
from tests.scripted_broker import ScriptedBroker, produce_answer, recv_exactly, response

MECHANISMS = ["PLAIN", "SCRAM-SHA-256"]
ITERATIONS = 4096


class Scram:
    """The server side of one SCRAM-SHA-256 exchange."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.step = 0
        self.user = None

    def next(self, message: bytes) -> tuple[bytes, bool | None]:
        """(server message, True when authenticated / False when refused / None when more is to come)."""
        text = message.decode()
        if self.step == 0:
            self.step = 1
            self.client_first_bare = text.split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in self.client_first_bare.split(","))
            self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            self.salt = os.urandom(16)
            self.server_first = f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={ITERATIONS}"
            return self.server_first.encode(), None
        attrs = dict(a.split("=", 1) for a in text.split(","))
        without_proof = text.rsplit(",p=", 1)[0]
        password = self.users.get(self.user)
        if password is None or attrs.get("r") != self.nonce:
            return b"e=unknown-user", False
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, ITERATIONS)
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored = hashlib.sha256(client_key).digest()
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(stored, auth_message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        if base64.b64decode(attrs["p"]) != proof:
            return b"e=invalid-proof", False
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        return b"v=" + base64.b64encode(hmac.new(server_key, auth_message, hashlib.sha256).digest()), True


class SaslBroker(ScriptedBroker):
    """The scripted broker's sockets and threads, with its own serving loop (raw tokens have no Kafka header)."""

    def __init__(self, users: dict[str, str]) -> None:
        super().__init__()
        self.users = users
        self.advertised_port = 0  # set to the proxy's port once known
        self.authenticated: list[str] = []
        self.seen: list[int] = []

    def _authenticate(self, mechanism: str, token: bytes, state: dict) -> tuple[bytes, bool | None]:
        if mechanism == "PLAIN":
            _, user, password = token.split(b"\x00")
            ok = self.users.get(user.decode()) == password.decode()
            if ok:
                self.authenticated.append(user.decode())
                state["done"] = True
            return b"", ok
        scram = state.setdefault("scram", Scram(self.users))
        message, ok = scram.next(token)
        if ok:
            self.authenticated.append(scram.user)
            state["done"] = True
        return message, ok

    def _serve(self, conn: socket.socket) -> None:
        state: dict = {}
        raw_mechanism = None
        try:
            while (size := recv_exactly(conn, 4)) is not None:
                body = recv_exactly(conn, struct.unpack(">i", size)[0])
                if body is None:
                    return
                if raw_mechanism is not None:  # after SaslHandshake v0: a raw token
                    message, ok = self._authenticate(raw_mechanism, body, state)
                    if ok is False:
                        return
                    conn.sendall(struct.pack(">i", len(message)) + message)
                    if ok:
                        raw_mechanism = None
                    continue
                request = size + body
                header = parse_request_prefix(request, max_size=2**31 - 1)
                self.seen.append(header.api_key)
                if header.api_key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE) and not state.get("done"):
                    return  # Kafka: only the SASL exchange before authentication
                if not self._answer(conn, header, request, state) and "raw" in state:
                    raw_mechanism = state.pop("raw")
                elif state.pop("close", False):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, header: RequestHeader, request: bytes, state: dict) -> bool:
        version, body = header.api_version, request[header.header_length :]
        if header.api_key == API_VERSIONS:
            version = min(version, 3)
            msg = new_response(
                API_VERSIONS,
                version,
                error_code=0,
                api_keys=[
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, lo, hi in (
                        (PRODUCE, 3, 9),
                        (METADATA, 1, 12),
                        (API_VERSIONS, 0, 3),
                        (SASL_HANDSHAKE, 0, 1),
                        (SASL_AUTHENTICATE, 0, 2),
                    )
                ],
            )
            conn.sendall(
                frame(
                    encode_response_header(API_VERSIONS, version, header.correlation_id)
                    + encode_response(API_VERSIONS, version, msg)
                )
            )
        elif header.api_key == SASL_HANDSHAKE:
            mechanism = decode_request(SASL_HANDSHAKE, version, body).mechanism
            ok = mechanism in MECHANISMS
            msg = new_response(SASL_HANDSHAKE, version, error_code=0 if ok else 33, mechanisms=MECHANISMS)
            conn.sendall(response(header, encode_response(SASL_HANDSHAKE, version, msg)))
            state["mechanism"] = mechanism
            state.pop("scram", None)
            if ok and version == 0:
                state["raw"] = mechanism
                return False
        elif header.api_key == SASL_AUTHENTICATE and state.get("done"):
            msg = new_response(
                SASL_AUTHENTICATE,
                version,
                error_code=34,
                auth_bytes=b"",
                error_message="SaslAuthenticate request received after successful authentication",
            )
            conn.sendall(response(header, encode_response(SASL_AUTHENTICATE, version, msg)))
        elif header.api_key == SASL_AUTHENTICATE:
            token = decode_request(SASL_AUTHENTICATE, version, body).auth_bytes
            message, ok = self._authenticate(state.get("mechanism"), token, state)
            msg = new_response(
                SASL_AUTHENTICATE,
                version,
                error_code=58 if ok is False else 0,
                error_message="Authentication failed" if ok is False else None,
                auth_bytes=message,
            )
            conn.sendall(response(header, encode_response(SASL_AUTHENTICATE, version, msg)))
            if ok is False:
                state["close"] = True
        elif header.api_key == METADATA:
            req = decode_request(METADATA, version, body)
            names = [t.name for t in (req.topics or [])]
            msg = new_response(
                METADATA,
                version,
                brokers=[{"node_id": 0, "host": "127.0.0.1", "port": self.advertised_port}],
                cluster_id="sasl",
                controller_id=0,
                topics=[
                    {
                        "name": n,
                        "error_code": 0,
                        "partitions": [{"partition_index": 0, "leader_id": 0, "replica_nodes": [0], "isr_nodes": [0]}],
                    }
                    for n in names
                ],
            )
            conn.sendall(response(header, encode_response(METADATA, version, msg)))
        elif header.api_key == PRODUCE and header.acks != 0:
            conn.sendall(produce_answer(header, request))
        return True
