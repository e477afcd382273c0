"""One quota state across processes, the receiving half: the usage of its peers (a
:class:`~quota.sharing.usage_delta.UsageDelta` each) recorded into a process's own managers as remote usage. Pure:
``now_ms`` is passed in.

Remote usage goes into the same rates and buckets as local usage, at the receiver's ``now_ms``, so the receiver's
next decision for one of its own clients sees the total; it never decides anything by itself, and it is not added
to the receiver's own totals (``value_total``, new producer ids counted), so per-process counters still add up to
what clients did. A receiver's view lags the others' by at most one sync interval plus the transport. Each entity
arrives under its quota tags (:mod:`quota.sharing.usage_share`), which the receiver resolves against its own table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.managers.topic_quota import TopicQuotas
from quota.sharing.usage_delta import EntityUsage, UsageDelta, columns

RECORD_STEP = 500
"""Remote entries recorded between two yields of :func:`record_remote_steps` (a few milliseconds of work)."""


def record_remote(
    delta: UsageDelta,
    now_ms: int,
    *,
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
    requests: ClientQuotaManager | None = None,
    topics: TopicQuotas | None = None,
) -> None:
    """Record a peer's ``delta`` into this process's managers at ``now_ms`` (see the module docstring);
    ``requests``: the request-rate manager its ``requests`` rows go to (None: they are not kept here); its topic
    usage into ``topics`` (None: a receiver without topic quotas drops it)."""
    for _ in record_remote_steps(
        delta,
        lambda: now_ms,
        produce=produce,
        fetch=fetch,
        mutations=mutations,
        producer_ids=producer_ids,
        connections=connections,
        requests=requests,
        topics=topics,
        step=None,
    ):
        pass


def record_remote_steps(
    delta: UsageDelta,
    now_ms: Callable[[], int],
    *,
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
    requests: ClientQuotaManager | None = None,
    topics: TopicQuotas | None = None,
    step: int | None = RECORD_STEP,
) -> Iterator[int]:
    """:func:`record_remote` in steps of ``step`` entries, yielding the entries recorded so far after each, so the
    caller can let other work run in between (10^5 entities take about a second); ``now_ms`` is read at every step.
    ``step`` None: all at once."""
    done = 0
    now = now_ms()
    for entries, record in _pieces(delta, step, produce, fetch, mutations, producer_ids, requests, topics):
        record(now)
        done += entries
        if step is not None and done % step == 0:
            yield done
            now = now_ms()
    if delta.listeners or delta.ips:
        connections.record_remote(delta.listeners, delta.ips, now)
    if delta.open_connections:
        connections.peers.update(delta.source, delta.open_connections)
    yield done


def _pieces(
    delta: UsageDelta,
    step: int | None,
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    requests: ClientQuotaManager | None,
    topics: TopicQuotas | None,
) -> Iterator[tuple[int, Callable[[int], None]]]:
    """The per-entity part of ``delta`` as ``(entries, record(now_ms))`` in order, none across a multiple of ``step``
    entries: byte-rate and request-rate rows (a topic's too, tagged ``("", topic)`` as the topic quota managers tag
    it) in runs of a peer's columns (sliced only at a step), each mutation row and producer-id user alone. Made as
    taken, so a slice is made only when its step comes."""
    done = 0
    rates: list[tuple[ClientQuotaManager | None, Sequence[EntityUsage]]] = [
        (produce, delta.produce),
        (fetch, delta.fetch),
        (requests, delta.requests),
    ]
    if topics is not None:
        rates += [(topics.produce, delta.topic_produce), (topics.fetch, delta.topic_fetch)]
        rates += [(topics.partition_produce, delta.partition_produce), (topics.partition_fetch, delta.partition_fetch)]
    for manager, rows in rates:
        if not rows or manager is None:
            continue
        users, client_ids, values = columns(rows)  # a decoded record's own columns
        at, n = 0, len(values)
        while at < n:
            end = n if step is None else min(n, at + step - done % step)
            if at == 0 and end == n:
                yield n, partial(manager.record_remote_rows, users, client_ids, values)
            else:
                yield end - at, partial(manager.record_remote_rows, users[at:end], client_ids[at:end], values[at:end])
            done += end - at
            at = end
    peer = delta.source  # what it gives back is judged against what it charged (quota.primitives.peer_refunds)
    for user, client_id, value in delta.mutations:
        yield 1, partial(mutations.record_remote, user, client_id, value, peer=peer)
    for user, count, ids in delta.producer_ids:
        yield 1, partial(producer_ids.record_remote, user, count, ids, peer=peer)
