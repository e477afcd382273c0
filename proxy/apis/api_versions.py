"""ApiVersions: advertise only versions the proxy can handle for the APIs it decodes.

For an API the proxy decodes, the client is offered the intersection of the broker's range and the proxy's;
other APIs pass through as the broker advertises them. A request for an ApiVersions version newer than the
proxy knows is answered by the proxy itself with the v0 UNSUPPORTED_VERSION body (Kafka's own behaviour), which
lists the ApiVersions versions to retry with. The broker's own Metadata range is noted on the session: the proxy's
own lookups on the connection send a version it serves (:mod:`proxy.apis.metadata`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from proxy.apis.plan import ConnectionScope, LookUp, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import ALTER_CLIENT_QUOTAS, API_VERSIONS, DESCRIBE_CLIENT_QUOTAS, DESCRIBE_TRANSACTIONS, METADATA
from proxy.codec.error_codes import NONE
from proxy.codec.frame import DROP
from proxy.codec.header import RequestHeader, encode_response_header, frame
from proxy.codec.messages import (
    DECODED_APIS,
    Message,
    api_versions_unsupported_body,
    decode_api_versions_response,
    encode_response,
    new_response,
)
from proxy.session.session import Session

MIN_VERSION, MAX_VERSION = DECODED_APIS[API_VERSIONS]


def plan(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if header.api_version > MAX_VERSION:
        body = api_versions_unsupported_body(MIN_VERSION, MAX_VERSION)
        response = frame(encode_response_header(API_VERSIONS, 0, header.correlation_id) + body)
        return Plan(action=DROP, local_response=response)
    version = header.api_version
    served = SERVED_BY_PROXY_KEY if scope.client_quotas is not None else ()

    def observe(body: memoryview) -> None:
        _note(session, broker_answer(version, served, bytes(body)).noted)

    return Plan(leg=ResponseLeg(observe=observe, rewrite=lambda body: broker_answer(version, served, bytes(body)).sent))


def knowing_broker_versions(session: Session, then: Callable[[], Outcome]) -> Outcome:
    """``then()`` once the broker's versions of the APIs the proxy's own requests use (``broker_lookup_versions``)
    are known on this connection: at once when its ApiVersions answer was seen (every Kafka client asks first), else
    after an ApiVersions v0 of the proxy's own."""
    if session.broker_lookup_versions is not None:
        return then()

    def answered(reply: memoryview) -> Outcome:
        note_broker_versions(session, decode_api_versions_response(0, reply))
        if session.broker_lookup_versions is None:
            session.broker_lookup_versions = {}  # an error: taken as having none of them
        return then()

    return LookUp(API_VERSIONS, 0, b"", answered)


def note_broker_versions(session: Session, msg: Message) -> None:
    """What the proxy's own requests on this connection may send, from the broker's ApiVersions answer ``msg``."""
    _note(session, _noted(msg))


def _note(session: Session, noted: Noted | None) -> None:
    if noted is not None:  # an error leaves what was noted
        session.broker_metadata_versions, session.broker_lookup_versions = noted


Noted = tuple[tuple[int, int] | None, dict[int, tuple[int, int]] | None]  # the broker's Metadata range, lookups'


def _noted(msg: Message) -> Noted | None:
    """The broker's ranges of the APIs the proxy's own requests use, from its answer ``msg`` (None: an error)."""
    if msg.error_code != NONE:
        return None
    metadata = next(((a.min_version, a.max_version) for a in msg.api_keys if a.api_key == METADATA), None)
    lookups = {
        a.api_key: (a.min_version, a.max_version)
        for a in msg.api_keys
        if a.api_key in (DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS, DESCRIBE_TRANSACTIONS)
    }
    return metadata, lookups


@dataclass(frozen=True, slots=True)
class BrokerAnswer:
    """What one ApiVersions answer of the broker gives: the body the client is sent (None: the broker's as it is) and
    what the session notes of it (None: nothing, an error). Shared by every connection that gets the same answer:
    read, never changed."""

    sent: bytes | None
    noted: Noted | None


@lru_cache(maxsize=64)
def broker_answer(version: int, served: tuple[tuple[int, tuple[int, int]], ...], body: bytes) -> BrokerAnswer:
    """The broker's ApiVersions answer ``body`` (of ``version``) decoded once, intersected and re-encoded. Every
    client asks it first on every connection, and a broker's answer is the same bytes each time, so the work is
    done once for each distinct answer (at most 64 kept): a connection flood sending one ApiVersions each cost the
    proxy about 320 us a connection in decoding and encoding it (issue 44, T2 with the proxy short of CPU)."""
    msg = decode_api_versions_response(version, memoryview(body))
    noted = _noted(msg)
    if noted is None:
        return BrokerAnswer(None, None)
    return BrokerAnswer(intersect(version, memoryview(body), dict(served), msg), noted)


# APIs the proxy answers itself when a dynamic config is configured: advertised whatever the broker says.
SERVED_BY_PROXY = {DESCRIBE_CLIENT_QUOTAS: (0, 1), ALTER_CLIENT_QUOTAS: (0, 1)}
SERVED_BY_PROXY_KEY = tuple(sorted(SERVED_BY_PROXY.items()))


def intersect(
    version: int, body: memoryview, served: dict[int, tuple[int, int]] | None = None, msg: Message | None = None
) -> bytes | None:
    """The broker's answer ``body`` (``msg``, when decoded already: changed in place) as the client is sent it."""
    msg = msg if msg is not None else decode_api_versions_response(version, body)
    if msg.error_code != NONE:
        return None  # an error (or the v0 fallback body) goes back as the broker sent it
    kept = []
    served = served or {}
    if served:  # the proxy's own ranges, in place of the broker's
        kept.extend(
            new_response(
                API_VERSIONS,
                version,
                api_keys=[
                    {"api_key": api_key, "min_version": low, "max_version": high}
                    for api_key, (low, high) in served.items()
                ],
            ).api_keys
        )
    for api in msg.api_keys:
        if api.api_key in served:
            continue
        ours = DECODED_APIS.get(api.api_key)
        if ours is not None:
            low, high = max(api.min_version, ours[0]), min(api.max_version, ours[1])
            if low > high:
                continue  # nothing both sides can speak: the client must not use this API through us
            api.min_version, api.max_version = low, high
        kept.append(api)
    msg.api_keys = kept
    return encode_response(API_VERSIONS, version, msg)
