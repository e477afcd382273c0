"""``GET /explain?user=...&client_id=...&ip=...[&listener=...][&topic=...[&partition=...]][&group=...]`` on the ops
port: why is this client throttled?

The answer is :func:`quota.explain.explain.explain` over the running proxy's quota state, as JSON (``kafka-quota-proxy
explain`` asks for it and prints it). The ops port may be reachable by tenants, so:

- the query is checked before anything is read: known parameters only, each at most once, an IP address, a known
  listener, names of at most :data:`MAX_NAME` characters; anything else is a 400 saying what is wrong;
- nothing is made or changed by asking: sensors and buckets are looked up, never made (a tenant cannot grow the
  proxy's tables, nor reset or fill a quota, by asking about made-up clients);
- the work is bounded (the table's eight levels per quota, the client's open connections) and the answers are
  rate-limited, :data:`ANSWERS_PER_S` per second with as many at once (past that, 429): an answer is computed on the
  event loop, where the quota state lives, and must not take it from the clients.

The whole answer is ``{"who", "verdict", "answers": [one per process], "unanswered"}``: one answer for a single
process; with ``workers: N`` the parent gathers every worker's (:mod:`proxy.workers.explain`).
"""

from __future__ import annotations

import json
import time
import urllib.parse

from quota.explain.explain import explain
from quota.explain.state import ByteRateSet, QuotaState, VolumeView
from quota.explain.values import MAX_LISTED_CONNECTIONS, NOT_THROTTLED, PAUSED, THROTTLED, OpenConnection, Who, as_json
from quota.managers.connection import normalize_ip
from quota.primitives.token_bucket import TokenBucket

PARAMETERS = ("user", "client_id", "ip", "listener", "topic", "group", "partition")
REQUIRED = ("client_id", "ip")
ANONYMOUS = "ANONYMOUS"  # the principal of a client that did not authenticate (Kafka's KafkaPrincipal.ANONYMOUS)
MAX_NAME = 1024  # characters of a user or client id asked about (the request head is bounded at 8 KiB anyway)
ANSWERS_PER_S = 10.0
JSON = "application/json"
VERDICTS = (PAUSED, THROTTLED, NOT_THROTTLED)  # the whole answer's verdict: the first any process gives
UNKNOWN = "UNKNOWN"  # the whole answer's verdict when no process answered


class QueryError(ValueError):
    """A query that cannot be answered; the message says why (a 400's body)."""


def parse_query(query: bytes, listeners: tuple[str, ...]) -> Who:
    """The client asked about, from the URL's query string (percent-encoded UTF-8)."""
    try:
        pairs = urllib.parse.parse_qsl(
            query.decode("ascii"),
            keep_blank_values=True,
            strict_parsing=bool(query),
            errors="strict",
            max_num_fields=len(PARAMETERS),
        )
    except ValueError as exc:  # UnicodeDecodeError too
        raise QueryError(f"cannot read the query: {str(exc)[:200]}") from None
    given: dict[str, str] = {}
    for key, value in pairs:
        if key not in PARAMETERS:
            raise QueryError(f"unknown parameter {key[:64]!r} (known: {', '.join(PARAMETERS)})")
        if key in given:
            raise QueryError(f"{key} given more than once")
        if len(value) > MAX_NAME:
            raise QueryError(f"{key} is longer than {MAX_NAME} characters")
        given[key] = value
    missing = [key for key in REQUIRED if key not in given]
    if missing:
        raise QueryError(f"missing {', '.join(missing)} (user defaults to {ANONYMOUS}; client_id may be empty)")
    try:
        ip = normalize_ip(given["ip"])
    except ValueError:
        raise QueryError(f"ip {given['ip'][:64]!r} is not an IP address") from None
    listener = given.get("listener") or None
    if listener is not None and listener not in listeners:
        raise QueryError(f"no listener {listener[:64]!r} (listeners: {', '.join(listeners)})")
    user, topic, group = given.get("user") or ANONYMOUS, given.get("topic") or None, given.get("group") or None
    partition = None
    if given.get("partition"):
        index = given["partition"]
        if topic is None:
            raise QueryError("partition is a partition of a topic: give topic too")
        if not (index.isascii() and index.isdigit() and index == str(int(index)) and int(index) < 2**31):
            raise QueryError(f"partition {index[:64]!r} is not a partition index (0 to {2**31 - 1})")
        partition = int(index)
    return Who(user, given["client_id"], ip, listener, topic, group, partition)


def whole_answer(who: dict, answers: list[dict], unanswered: list[str], note: str | None = None) -> bytes:
    """The answers of every process asked, under the verdict of the one most held back; ``note``: the parent's
    own part, with ``workers: N`` (the cluster budget it keeps for them all)."""
    verdict = next((v for v in VERDICTS if any(a.get("verdict") == v for a in answers)), UNKNOWN)
    return json.dumps(
        {"who": who, "verdict": verdict, "answers": answers, "unanswered": unanswered, "note": note}, allow_nan=False
    ).encode()


def checked(limiter: Limiter, query: bytes, listeners: tuple[str, ...]) -> Who | tuple[str, str, bytes]:
    """The client asked about, or the refusal to answer: 429 past the rate, 400 for a query that cannot be read."""
    if not limiter.allow():
        return "429 Too Many Requests", "text/plain", f"at most {ANSWERS_PER_S:g} explanations a second\n".encode()
    try:
        return parse_query(query, listeners)
    except QueryError as exc:
        return "400 Bad Request", "text/plain", f"{exc}\n".encode()


class Limiter:
    """At most ``rate`` answers a second, as many at once."""

    def __init__(self, rate: float = ANSWERS_PER_S, clock=time.monotonic) -> None:
        self._clock = clock
        self._bucket = TokenBucket(rate, rate, self._now())

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def allow(self) -> bool:
        now = self._now()
        if self._bucket.refill(now) < 1:
            return False
        self._bucket.take(1, now)
        return True


class Explainer:
    """``/explain`` of one proxy process (``app``: a :class:`proxy.app.ProxyApp`)."""

    def __init__(self, app, limiter: Limiter | None = None) -> None:
        self._app = app
        self._limiter = limiter or Limiter()
        self.listeners = tuple(lc.name for lc in app.config.listeners)

    def answer(self, query: bytes) -> tuple[str, str, bytes]:
        """(status, content type, body): computed here, on the event loop, at once."""
        who = checked(self._limiter, query, self.listeners)
        if not isinstance(who, Who):
            return who
        explanation = as_json(explain(self.state(who), who))
        answer = {"worker": None, **{k: v for k, v in explanation.items() if k != "who"}}
        return "200 OK", JSON, whole_answer(explanation["who"], [answer], [])

    def state(self, who: Who) -> QuotaState:
        app = self._app
        quotas = app.quotas
        settings = app.config.settings
        volume = None
        if quotas.volume is not None:
            v = quotas.volume
            volume = VolumeView(
                v.state, v.produce, int(v.config.freshness_seconds * 1000), v.config.missing_data_action
            )
        usage = app.cluster_usage
        opened, listed = _open_connections(app.connections, who)
        return QuotaState(
            quotas.produce.quotas,
            tuple(ByteRateSet(label, s.produce, s.fetch, s.producer_ids) for label, s in quotas.quota_sets()),
            quotas.mutations,
            app.connection_quotas,
            self.listeners,
            quotas.clock.now_ms(),
            wall_ms=time.time_ns() // 1_000_000,
            shadow_mode=quotas.mode.shadow,
            scope=settings.quota_scope,
            cluster_mode=any(lc.cluster_mode for lc in app.config.listeners),
            cluster_peers=None if usage is None else usage.peers.peek(usage.wall.now_ms()),
            topics_shared=None if usage is None else usage.topic_share.shared,
            volume=volume,
            open_connections=listed,
            connections_open=opened,
            workers=1 if not app.reuse_port else settings.workers,
            topics=quotas.topics,
            requests=quotas.requests,
        )


def _open_connections(connections: set, who: Who) -> tuple[int, tuple[OpenConnection, ...]]:
    """The open connections of the client's user from its IP (on its listener if one was named; a connection does
    not have one client id: each request names its own), how many, and the first :data:`MAX_LISTED_CONNECTIONS`
    as they are now."""
    now = time.monotonic_ns()  # the connections' flow clock
    found = [
        conn
        for conn in tuple(connections)  # one copy: the loop is not running meanwhile anyway
        if conn.session.user == who.user
        and conn.session.peer_ip == who.ip
        and (who.listener is None or conn.ctx.name == who.listener)
    ]
    listed = []
    for conn in found[:MAX_LISTED_CONNECTIONS]:
        muted, held = conn.flow.waits_ms(now)
        listed.append(
            OpenConnection(
                conn.ctx.name,
                conn.peer,
                conn.session.user,
                conn.flow.mute_state,
                muted,
                held,
                conn.session.muted_for,
                conn.session.muted_by,
            )
        )
    return len(found), tuple(listed)
