"""The proxy's own Kafka traffic, in one toolbox: every request the proxy makes to the cluster for itself goes
through here, with public aiokafka APIs and every API key and error code from :mod:`proxy.codec` (the two aiokafka
internals :mod:`proxy.cluster.own_clients` relies on are pinned and checked by a test of their own).

- :func:`ask`: one request on a fresh connection to one broker, its decoded answer, bounded in time (readiness,
  broker discovery, DescribeLogDirs).
- :class:`OwnKafka`: how the proxy's own traffic reaches the cluster (``upstream.own_clients``, else the upstream
  bootstrap servers, with their TLS and SASL).
  ``ask_any`` asks the bootstrap servers in turn until one answers; ``look`` reads the brokers and some topics'
  partitions from one Metadata answer (:class:`ClusterLook`); ``options`` are what every aiokafka client of the
  proxy's own is built with; ``ensure_topic`` creates one of the proxy's compacted topics when it is missing (one
  CreateTopics of its own, with the broker's default replication factor).
- :func:`start_client`: start one of the proxy's own aiokafka clients within a bound; one whose start fails, times
  out or is cancelled is stopped before the error goes on (what it opened is closed).
- :func:`stop_client`: stop one of the proxy's own aiokafka clients within a bound.
- :class:`Backoff`: the delays between retries of something that keeps failing.

The proxy's aiokafka clients are created inside the tasks the app starts with
:data:`proxy.cluster.own_clients.ROUTE` set (their connections are routed and recognised as the proxy's own).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from config.model import Address, OwnClientsConfig, UpstreamSasl
from proxy.cluster.sasl_login import SaslLoginError, exchanges
from proxy.codec.apis import CREATE_TOPICS, METADATA, OWN_METADATA_VERSION, SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.error_codes import NONE, NOT_CONTROLLER, TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, error_name
from proxy.codec.errors import ProtocolError
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import Message, decode_response, encode_request, new_request
from proxy.ground.tasks import wait_for

log = logging.getLogger(__name__)

CLIENT_ID = "kafka-quota-proxy"
MAX_RESPONSE = 64 << 20  # the largest answer ask reads
CORRELATION_ID = 1  # one request per connection
STOP_TIMEOUT_S = 5.0  # stopping one of the proxy's own Kafka clients never holds shutdown longer
START_SETTLE_S = 1.0  # a start given up (cancelled, timed out) may end this long before its client is stopped
CREATE_TIMEOUT_S = 10.0  # ensure_topic, start to finish
# ensure_topic's CreateTopics: v4 is the first whose replication factor may be -1 (KIP-464, the broker's
# default.replication.factor); every broker since Kafka 2.4 serves v5.
OWN_CREATE_TOPICS_VERSION = 5

# A decoded answer (proxy.codec.schema.Message): its fields are those of its API's schema at its version, made at run
# time, which the type checker does not see; read as Any.
Answer = Any

# What ask raises when the broker does not answer, or not with a Kafka answer to the request
ASK_ERRORS = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, ProtocolError, SaslLoginError)


async def ask(
    address: Address,
    api_key: int,
    version: int,
    request: Message,
    timeout_s: float,
    client_id: str = CLIENT_ID,
    ssl_context=None,
    sasl: UpstreamSasl | None = None,
) -> Answer:
    """One request of the proxy's own on a fresh connection to ``address``; its decoded answer. With ``sasl`` the
    connection logs in first (SaslHandshake v1, SaslAuthenticate v2). Bounded by ``timeout_s`` in all; raises one of
    :data:`ASK_ERRORS`, or :class:`SaslLoginError` when the broker refuses the login."""

    async def exchange() -> Answer:
        reader, writer = await asyncio.open_connection(
            address.host, address.port, ssl=ssl_context, server_hostname=address.host if ssl_context else None
        )
        try:
            correlation = CORRELATION_ID
            if sasl is not None:
                correlation = await _login(reader, writer, sasl, client_id)
            return await _round_trip(reader, writer, api_key, version, request, correlation, client_id)
        finally:
            writer.close()

    return await wait_for(exchange(), timeout_s)


async def _round_trip(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    api_key: int,
    version: int,
    request: Message,
    correlation: int,
    client_id: str,
) -> Answer:
    writer.write(
        frame(
            encode_request_header(api_key, version, correlation, client_id) + encode_request(api_key, version, request)
        )
    )
    await writer.drain()
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    if not 4 <= size <= MAX_RESPONSE:
        raise ValueError(f"a response of {size} bytes")
    whole = struct.pack(">i", size) + await reader.readexactly(size)
    if struct.unpack(">i", whole[4:8])[0] != correlation:
        raise ValueError("a response with another correlation id")
    return decode_response(api_key, version, memoryview(whole)[response_header_length(api_key, version, whole) :])


async def _login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sasl: UpstreamSasl, client_id: str) -> int:
    """Log the connection in; returns the next correlation id."""
    correlation = CORRELATION_ID
    answer = await _round_trip(
        reader,
        writer,
        SASL_HANDSHAKE,
        1,
        new_request(SASL_HANDSHAKE, 1, mechanism=sasl.mechanism),
        correlation,
        client_id,
    )
    if answer.error_code != NONE:
        raise SaslLoginError(
            f"the broker does not take {sasl.mechanism} ({error_name(answer.error_code)}; it "
            f"offers {', '.join(answer.mechanisms) or 'none'})"
        )
    steps = exchanges(sasl)
    payload = next(steps)
    while True:
        correlation += 1
        answer = await _round_trip(
            reader,
            writer,
            SASL_AUTHENTICATE,
            2,
            new_request(SASL_AUTHENTICATE, 2, auth_bytes=payload),
            correlation,
            client_id,
        )
        if answer.error_code != NONE:
            raise SaslLoginError(
                f"{sasl.mechanism} login of {sasl.username!r} refused: "
                f"{error_name(answer.error_code)} {answer.error_message or ''}".rstrip()
            )
        try:
            payload = steps.send(bytes(answer.auth_bytes))
        except StopIteration:
            return correlation + 1


@dataclass(frozen=True, slots=True)
class ClusterLook:
    """One Metadata answer: the brokers (node id -> address), and each topic asked for's partitions (empty: the
    topic does not exist; absent: the broker answered another error for it, named in ``errors``)."""

    brokers: dict[int, Address]
    partitions: dict[str, frozenset[int]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # topic -> Kafka's name of the error answered for it
    controller_id: int = -1  # the node the answer names as controller (-1: none named)


def cluster_look(msg: Answer) -> ClusterLook:
    """What a decoded Metadata answer says of the brokers and of the topics it names."""
    partitions: dict[str, frozenset[int]] = {}
    errors: dict[str, str] = {}
    for topic in msg.topics:
        if topic.error_code == NONE:
            partitions[topic.name] = frozenset(p.partition_index for p in topic.partitions)
        elif topic.error_code == UNKNOWN_TOPIC_OR_PARTITION:
            partitions[topic.name] = frozenset()
        else:
            errors[topic.name] = error_name(topic.error_code)
    return ClusterLook({b.node_id: Address(b.host, b.port) for b in msg.brokers}, partitions, errors, msg.controller_id)


class TopicNotCreated(Exception):
    """The broker answered CreateTopics for one of the proxy's topics with an error (not "already exists")."""


@dataclass(frozen=True)
class OwnKafka:
    """How the proxy's own traffic reaches the cluster: the upstream bootstrap servers, tried in order, and the TLS
    context for them (None: plaintext). The proxy's own aiokafka clients take the same (``options``)."""

    bootstrap: tuple[Address, ...]
    ssl_context: object = None
    sasl: UpstreamSasl | None = None  # the login of every connection of the proxy's own (``upstream.sasl``)

    @classmethod
    def of(cls, target: OwnClientsConfig) -> OwnKafka:
        """The proxy's own traffic to ``target`` (``config.upstream.own_traffic``)."""
        return cls(target.bootstrap_servers, target.tls.context() if target.tls is not None else None, target.sasl)

    def options(self, client_id: str) -> dict:
        """The keyword arguments every aiokafka client of the proxy's own starts from."""
        security: dict = {"security_protocol": "SSL", "ssl_context": self.ssl_context} if self.ssl_context else {}
        if self.sasl is not None:
            security.update(
                security_protocol="SASL_SSL" if self.ssl_context else "SASL_PLAINTEXT",
                sasl_mechanism=self.sasl.mechanism,
                sasl_plain_username=self.sasl.username,
                sasl_plain_password=self.sasl.password,
            )
        return {"bootstrap_servers": [str(a) for a in self.bootstrap], "client_id": client_id, **security}

    async def ask_any(
        self, api_key: int, version: int, request: Message, timeout_s: float, client_id: str = CLIENT_ID
    ) -> Answer | None:
        """The first bootstrap server's answer to ``request`` (each bounded by ``timeout_s``), or None when none
        answered (each failure logged)."""
        for address in self.bootstrap:
            try:
                return await ask(address, api_key, version, request, timeout_s, client_id, self.ssl_context, self.sasl)
            except ASK_ERRORS as exc:
                log.info(
                    "%s: %s did not answer %s: %s",
                    client_id,
                    address,
                    type(request).__name__,
                    str(exc) or type(exc).__name__,  # a timeout's str() is empty: its class says what happened
                )
        return None

    async def look(self, topics: Sequence[str], timeout_s: float, client_id: str = CLIENT_ID) -> ClusterLook | None:
        """The brokers, and the partitions of ``topics`` (none: the brokers alone), from the first bootstrap server
        that answers Metadata; None when none does. Never creates a topic."""
        request = new_request(
            METADATA, OWN_METADATA_VERSION, topics=[{"name": t} for t in topics], allow_auto_topic_creation=False
        )
        msg = await self.ask_any(METADATA, OWN_METADATA_VERSION, request, timeout_s, client_id)
        return None if msg is None else cluster_look(msg)

    async def ensure_topic(self, topic: str, client_id: str) -> None:
        """Create one of the proxy's compacted topics (config, volume usage, cluster usage; one partition: one order
        for every key) if it is missing, within CREATE_TIMEOUT_S, with the broker's own
        ``default.replication.factor`` (replication factor -1, KIP-464). A fixed factor of 1 (aiokafka's admin client
        cannot send -1: it speaks CreateTopics v0-3) left the proxy's topics on one broker: lost with it, and on a
        cluster with ``min.insync.replicas`` 2 every ``acks=all`` write to them refused (NOT_ENOUGH_REPLICAS).
        Operators who want another factor create the topics themselves. A broker that answers NOT_CONTROLLER (an
        old ZooKeeper-mode broker that does not forward) is asked again through the controller its metadata names.
        Raises :class:`TopicNotCreated` when the broker refuses (no right to create it, a policy) or none answers."""
        request = new_request(
            CREATE_TOPICS,
            OWN_CREATE_TOPICS_VERSION,
            timeout_ms=int(CREATE_TIMEOUT_S * 1000) // 2,
            topics=[
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": -1,
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
            ],
        )
        async with asyncio.timeout(CREATE_TIMEOUT_S):
            response = await self.ask_any(
                CREATE_TOPICS, OWN_CREATE_TOPICS_VERSION, request, CREATE_TIMEOUT_S / 2, client_id
            )
            if response is not None and any(t.error_code == NOT_CONTROLLER for t in response.topics):
                look = await self.look([], CREATE_TIMEOUT_S / 4, client_id)
                controller = None if look is None else look.brokers.get(look.controller_id)
                response = (
                    None
                    if controller is None
                    else await ask(
                        controller,
                        CREATE_TOPICS,
                        OWN_CREATE_TOPICS_VERSION,
                        request,
                        CREATE_TIMEOUT_S / 4,
                        client_id,
                        self.ssl_context,
                        self.sasl,
                    )
                )
        if response is None:
            raise TopicNotCreated(f"CreateTopics {topic}: no broker answered")
        for result in response.topics:
            if result.error_code not in (NONE, TOPIC_ALREADY_EXISTS):
                why = f": {result.error_message}" if result.error_message else ""
                raise TopicNotCreated(f"CreateTopics {result.name}: {error_name(result.error_code)}{why}")


async def start_client(client, timeout_s: float | None) -> None:
    """Start one of the proxy's own aiokafka clients within ``timeout_s``; one whose start fails, times out or is
    cancelled is stopped (:func:`stop_client`) before the error or cancellation goes on.

    The start is never cancelled midway unless it outlasts START_SETTLE_S more: aiokafka's ``bootstrap`` cancelled
    while its Metadata request is out leaves that connection open, held by nothing that ``stop()`` closes (its reader
    task was "destroyed but pending" when the loop closed, its transport unclosed; aiokafka 0.14). So the start
    runs on in a task of its own (shielded), is awaited for up to START_SETTLE_S once the caller gives up, and the
    client is then stopped, closing what the start opened."""
    starting = asyncio.ensure_future(client.start())
    starting.add_done_callback(lambda t: t.cancelled() or t.exception())  # its error is the caller's, or none's
    try:
        await wait_for(asyncio.shield(starting), timeout_s)
    except BaseException:
        if not starting.done():
            try:
                await asyncio.wait({starting}, timeout=START_SETTLE_S)
            except asyncio.CancelledError:
                pass  # cancelled again: stopping it is all that is left to do
            starting.cancel()  # a no-op once it has ended
        await stop_client(client)
        raise


async def stop_client(client) -> None:
    """Stop one of the proxy's own aiokafka clients (consumer, producer: ``stop``; admin: ``close``) within
    STOP_TIMEOUT_S; a failure to stop is not an error (it is already failing, or the proxy is stopping).

    A cancellation of the calling task that arrives meanwhile is raised once the client has stopped: aiokafka's
    ``stop()`` cancels its own tasks and awaits them, and they end normally, so a cancellation handed on to one of
    them would otherwise be lost (a background task cancelled by ``ProxyApp.stop`` then ran on, and the stop waited
    for its bound, tests/integration/test_own_client_stop.py).

    The loop runs once before ``stop()``: a task the client made that has not run yet, when cancelled, ends with
    ``CancelledError`` without running at all, and a consumer's ``stop()`` awaiting such a task (the offsets task of
    its coordinator, made at the end of ``start()``) raised there, before it closed its fetcher and its connections:
    they stayed on the loop until it closed."""
    task = asyncio.current_task()
    requested = task.cancelling() if task is not None else 0
    try:
        await asyncio.sleep(0)  # the tasks the client made run once (their first step is already scheduled)
    except asyncio.CancelledError:
        pass  # counted in task.cancelling(): raised once the client has stopped
    stopping = (getattr(client, "stop", None) or client.close)()
    try:
        await wait_for(stopping, STOP_TIMEOUT_S)
    except Exception:  # noqa: BLE001
        stopping.close()  # never started when wait_for itself failed (its loop is closing): no "never awaited"
    if task is not None and task.cancelling() > requested:
        raise asyncio.CancelledError


class Backoff:
    """The delays between retries of something that keeps failing: ``start_s``, doubled after every failure up to
    ``max_s``, and ``start_s`` again once it succeeds."""

    __slots__ = ("start_s", "max_s", "_next_s")

    def __init__(self, start_s: float, max_s: float) -> None:
        self.start_s, self.max_s = start_s, max_s
        self._next_s = start_s

    def failed(self) -> float:
        """The delay before the next try, after one more failure."""
        delay, self._next_s = self._next_s, min(self._next_s * 2, self.max_s)
        return delay

    def succeeded(self) -> None:
        self._next_s = self.start_s

    async def wait(self) -> None:
        """Sleep the delay one more failure calls for."""
        await asyncio.sleep(self.failed())
