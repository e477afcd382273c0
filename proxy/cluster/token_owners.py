"""Delegation tokens' owners: who a SCRAM login with ``tokenauth=true`` authenticates, as Kafka decides it.

Kafka authenticates a delegation-token login as the token's OWNER (``ScramSaslServer``: the authorization id is
``DelegationTokenCache.owner(tokenId)``, the owner principal's name, whoever requested the token, KIP-373), and its
quotas charge that user. The SCRAM exchange names only the token id, so the proxy asks the cluster: a
DescribeDelegationToken of its own (owners null: every token its principal may describe) on a connection of its own,
logged in with ``upstream.sasl`` (Kafka answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on PLAINTEXT connections).

- One answer teaches the owner of every token it lists; the HMACs it carries are never kept or logged. At most
  ``max_tokens`` owners are kept, the least recently used dropped first (a token id never changes owner, and a
  token that expired is refused by the broker before its owner is asked for, so nothing else needs to expire);
  the tokens a login waits for go in first, the others only while there is room.
- Lookups are single-flight: every login that waits while one runs is served by the next, which starts at most
  every ``min_interval_s`` (a token created a moment ago may reach the broker asked after the one that
  authenticated it: a login whose token an answer does not list waits for the next answer).
- :meth:`TokenOwners.resolve` hands back the owner, or :class:`OwnerUnknown` with the reason once ``bound_s`` has
  passed without an answer naming the token (no broker answered, an error, or a token the proxy's principal may not
  describe): the login is then refused (:mod:`proxy.apis.sasl`), never charged to anyone else.

Runs on the event loop, off every connection's request path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from proxy.cluster.kafka_clients import OwnKafka
from proxy.codec.apis import DESCRIBE_DELEGATION_TOKEN, OWN_DESCRIBE_DELEGATION_TOKEN_VERSION
from proxy.codec.error_codes import NONE, error_name
from proxy.codec.messages import new_request
from proxy.ground.logs import LogLimiter
from proxy.ground.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CLIENT_ID = "kafka-quota-proxy-token-owners"
MAX_TOKENS = 10_000  # owners kept (about 200 bytes each)
MAX_WAITING = 10_000  # logins waiting for a lookup; past it one is refused at once (memory stays bounded)
MIN_INTERVAL_S = 0.5  # between the starts of two lookups, however many logins wait
LOG_INTERVAL_S = 60.0  # the same failure to look tokens up is logged at most this often


@dataclass(frozen=True, slots=True)
class OwnerUnknown:
    """A token's owner could not be learnt, and why (said to the client and in the log)."""

    reason: str


class TokenOwners:
    """The owners of delegation tokens, learnt from the cluster. ``kafka`` None: nothing is looked up, every owner
    not given to :meth:`learn` is unknown at once (tests, and a scope built without the proxy's own traffic)."""

    def __init__(
        self,
        kafka: OwnKafka | None,
        bound_s: float,
        *,
        max_tokens: int = MAX_TOKENS,
        min_interval_s: float = MIN_INTERVAL_S,
        max_waiting: int = MAX_WAITING,
        on_refused: Callable[[], None] = lambda: None,
        on_lookup: Callable[[str], None] = lambda result: None,
    ) -> None:
        self._kafka, self._bound_s = kafka, bound_s
        self._max_tokens, self._min_interval_s, self._max_waiting = max_tokens, min_interval_s, max_waiting
        self._on_refused, self._on_lookup = on_refused, on_lookup  # on_lookup("answered" / "failed")
        self._owners: OrderedDict[str, str] = OrderedDict()  # token id -> owner name, least recently used first
        self._waiting: list[tuple[str, asyncio.Future]] = []  # (token id, woken by the next lookup's end)
        self._resolving = 0  # logins waiting for a lookup (queued or in the one running)
        self._task: asyncio.Task | None = None
        self._last_start: float | None = None  # loop time the last lookup started
        self._problem: str | None = None  # why the last lookup taught nothing (None: it was answered)
        self._logged: tuple[str, float] | None = None  # the last failure logged, and when
        self._refusals_log = LogLimiter(interval_s=LOG_INTERVAL_S)
        self._stopped = False
        self.lookups = 0  # DescribeDelegationToken requests sent
        self.refused = 0  # logins refused because their token's owner was not learnt

    def __len__(self) -> int:
        return len(self._owners)

    def owner(self, token_id: str) -> str | None:
        """The owner of ``token_id`` if known, without asking anyone."""
        owner = self._owners.get(token_id)
        if owner is not None:
            self._owners.move_to_end(token_id)
        return owner

    def learn(self, token_id: str, owner: str, wanted: bool = True) -> None:
        """``owner`` owns ``token_id``. ``wanted``: a login waits for it (the least recently used owner makes room);
        otherwise it is kept only while there is room."""
        if token_id in self._owners:
            self._owners[token_id] = owner
            self._owners.move_to_end(token_id)
            return
        if len(self._owners) >= self._max_tokens:
            if not wanted:
                return
            self._owners.popitem(last=False)
        self._owners[token_id] = owner

    def refused_login(self, listener: str, peer_ip: str, token_id: str, why: str) -> None:
        """A login from ``peer_ip`` with ``token_id`` is refused because the token's owner was not learnt (``why``):
        counted, and logged at most once a minute per token and reason."""
        self.refused += 1
        self._on_refused()
        suppressed = self._refusals_log.allow(token_id, why, time.monotonic())
        if suppressed is not None:
            more = f"; {suppressed} more not logged" if suppressed else ""
            log.warning(
                "listener %s: login of %s with delegation token %s refused: its owner could not be learnt (%s)%s",
                listener,
                peer_ip,
                token_id,
                why,
                more,
            )

    async def resolve(self, token_id: str) -> str | OwnerUnknown:
        """The owner of ``token_id``: known, or looked up (waiting at most ``bound_s``)."""
        owner = self.owner(token_id)
        if owner is not None:
            return owner
        if self._kafka is None or self._stopped:
            return OwnerUnknown("the proxy does not look delegation tokens up")
        if self._resolving >= self._max_waiting:
            return OwnerUnknown(f"more than {self._max_waiting} logins wait for a token lookup")
        self._resolving += 1
        try:
            return await self._resolve(token_id)
        finally:
            self._resolving -= 1

    async def _resolve(self, token_id: str) -> str | OwnerUnknown:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._bound_s
        while not self._stopped and (remaining := deadline - loop.time()) > 0:
            answered = loop.create_future()
            self._waiting.append((token_id, answered))
            if self._task is None or self._task.done():
                self._task = loop.create_task(self._run())
            try:
                async with asyncio.timeout(remaining):
                    await answered
            except TimeoutError:
                break
            owner = self.owner(token_id)
            if owner is not None:
                return owner
        return OwnerUnknown(
            self._problem
            or "not among the tokens the proxy's principal (upstream.sasl) may "
            "describe (Kafka's DESCRIBE on the token, DESCRIBE_TOKENS on its owner, or a super user)"
        )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            if self._last_start is not None:
                delay = self._last_start + self._min_interval_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            batch, self._waiting = self._waiting, []
            self._last_start = loop.time()
            try:
                await self._look({token_id for token_id, _ in batch})
            finally:  # cancelled (stopping) too: whoever waits is woken, and finds the proxy stopping
                for _, answered in batch:
                    if not answered.done():
                        answered.set_result(None)

    async def _look(self, wanted: set[str]) -> None:
        """One DescribeDelegationToken: the owners of every token it lists, those ``wanted`` first."""
        kafka = self._kafka
        if kafka is None:  # NO_TOKEN_OWNERS: never asked to look (a lookup is refused at once)
            return
        version = OWN_DESCRIBE_DELEGATION_TOKEN_VERSION
        request = new_request(DESCRIBE_DELEGATION_TOKEN, version, owners=None)
        self.lookups += 1
        try:
            answer = await kafka.ask_any(DESCRIBE_DELEGATION_TOKEN, version, request, self._bound_s, CLIENT_ID)
            failure = None
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, the logins waiting are refused, saying so
            answer, failure = None, f"{type(exc).__name__}: {exc}"
        self._on_lookup("failed" if answer is None or answer.error_code != NONE else "answered")
        if failure is not None:
            self._problem = f"the proxy's DescribeDelegationToken failed ({failure})"
        elif answer is None:
            self._problem = "no broker answered the proxy's DescribeDelegationToken"
        elif answer.error_code != NONE:
            self._problem = (
                f"the broker answered the proxy's DescribeDelegationToken with "
                f"{error_name(answer.error_code)} (its connection must log in: upstream.sasl)"
            )
        else:
            self._problem = None
            tokens = sorted(answer.tokens, key=lambda t: t.token_id not in wanted)  # wanted ones first
            for token in tokens:
                self.learn(token.token_id, token.principal_name, wanted=token.token_id in wanted)
            return
        now = asyncio.get_running_loop().time()
        if self._logged is None or self._logged[0] != self._problem or now - self._logged[1] >= LOG_INTERVAL_S:
            self._logged = (self._problem, now)
            log.warning(
                "delegation token owners not learnt: %s; logins with delegation tokens are refused until they are",
                self._problem,
            )

    async def stop(self) -> None:
        """Stop looking up; whoever still waits is handed OwnerUnknown (and refused)."""
        self._stopped = True
        task, self._task = self._task, None
        await cancel_and_wait(task)
        waiting, self._waiting = self._waiting, []
        for _, answered in waiting:
            if not answered.done():
                answered.set_result(None)


NO_TOKEN_OWNERS = TokenOwners(None, 0.0)  # every owner unknown at once (a scope built without the proxy's traffic)
