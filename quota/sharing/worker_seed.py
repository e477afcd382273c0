"""What a restarted worker takes from a serving peer so that it decides as the peer does from its first request
(issue 35). Pure: plain values in and out; the transport is :mod:`proxy.workers.link`'s.

A worker's quota state starts empty: byte-rate sensors and their smoothing buckets, the KIP-599 mutation buckets, the
KIP-936 producer-id buckets and known ids, the KIP-612 connection-creation rates, the request-rate sensors. Empty is
generous: a tenant at its limit on the others gets a fresh allowance (a window span of bytes or of requests, a burst
of topics or of new producer ids, a window of connections) from each restart. A serving peer's state holds every
worker's usage (shared through the parent), the dead one's included, so the newcomer starts from it: each seed is
bounded to the busiest entities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.managers.request_rate import RequestRateQuotas
from quota.managers.topic_quota import TopicQuotas
from quota.sharing import producer_id_seed

MAX_SEED_ENTITIES = 20_000  # per byte-rate and mutation quota, and IPs: the busiest entities' state
MAX_SEED_PID_USERS = 2_000  # producer-id users (filters of up to ~7 KiB each at the default sizing)
PART_ROWS = 2_000  # rows of one kind per part: a part is sent, and taken in, with the loop free in between
PID_PART_ROWS = 200  # producer-id users per part (their filters are larger)


def _kinds(
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    topics: TopicQuotas | None,
    requests: RequestRateQuotas | None,
) -> tuple[tuple[str, Callable[[int], Sequence[Any]], int], ...]:
    """(kind, rows at ``now``, rows per part) of every per-entity kind a seed carries (connections aside)."""
    kinds: tuple[tuple[str, Callable[[int], Sequence[Any]], int], ...] = (
        ("produce", lambda now: produce.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
        ("fetch", lambda now: fetch.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
        ("mutation", lambda now: mutations.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
        ("producer_ids", lambda now: producer_id_seed.seed_rows(producer_ids, now, MAX_SEED_PID_USERS), PID_PART_ROWS),
    )
    if topics is not None:  # the topic quotas' sensors, rows as a byte rate's (the topic as an anonymous client id)
        kinds += (
            ("topic_produce", lambda now: topics.produce.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
            ("topic_fetch", lambda now: topics.fetch.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
            ("partition_produce", lambda now: topics.partition_produce.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
            ("partition_fetch", lambda now: topics.partition_fetch.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
        )
    if requests is not None:  # request_rate's sensors: per client entity, and per group (as an anonymous client id)
        kinds += (
            ("requests", lambda now: requests.clients.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
            ("group_requests", lambda now: requests.groups.seed_rows(now, MAX_SEED_ENTITIES), PART_ROWS),
        )
    return kinds


def parts(
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
    now_ms: Callable[[], int],
    topics: TopicQuotas | None = None,
    requests: RequestRateQuotas | None = None,
) -> Iterator[dict[str, Any]]:
    """:func:`collect` a kind at a time (each read at its own ``now_ms()``), cut into parts of at most PART_ROWS
    rows (PID_PART_ROWS users): the caller may let other work run between two. The last part says ``last``."""
    for kind, rows_at, size in _kinds(produce, fetch, mutations, producer_ids, topics, requests):
        rows = rows_at(now_ms())
        for start in range(0, len(rows), size):
            yield {kind: rows[start : start + size]}
    conns = connections.seed_rows(now_ms(), MAX_SEED_ENTITIES)
    ips = conns.pop("ips")
    for start in range(PART_ROWS, len(ips), PART_ROWS):
        yield {"connections": {"ips": ips[start : start + PART_ROWS]}}
    yield {"connections": {**conns, "ips": ips[:PART_ROWS]}, "last": True}


def collect(
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
    now_ms: int,
    topics: TopicQuotas | None = None,
    requests: RequestRateQuotas | None = None,
) -> dict[str, Any]:
    """This worker's state for a newcomer, as JSON values (each manager's ``seed_rows``), in one piece."""
    seed: dict[str, Any] = {
        kind: rows_at(now_ms) for kind, rows_at, _ in _kinds(produce, fetch, mutations, producer_ids, topics, requests)
    }
    seed["connections"] = connections.seed_rows(now_ms, MAX_SEED_ENTITIES)
    return seed


class SeedError(ValueError):
    """A peer's state not of :func:`collect`'s shape (what was taken before the fault stays: a peer's own)."""


def install(
    seed: Any,
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
    now_ms: int,
    topics: TopicQuotas | None = None,
    requests: RequestRateQuotas | None = None,
) -> dict[str, int]:
    """A peer's :func:`collect` taken in; returns the entities of each kind it carried (for the log line). Raises
    :class:`SeedError` for anything else."""
    try:  # a seed is JSON from a peer: anything not of collect's shape fails here, not later
        produce.seed(seed.get("produce", ()), now_ms)
        fetch.seed(seed.get("fetch", ()), now_ms)
        if topics is not None:
            topics.produce.seed(seed.get("topic_produce", ()), now_ms)
            topics.fetch.seed(seed.get("topic_fetch", ()), now_ms)
            topics.partition_produce.seed(seed.get("partition_produce", ()), now_ms)
            topics.partition_fetch.seed(seed.get("partition_fetch", ()), now_ms)
        if requests is not None:
            requests.clients.seed(seed.get("requests", ()), now_ms)
            requests.groups.seed(seed.get("group_requests", ()), now_ms)
        mutations.seed(seed.get("mutation", ()), now_ms)
        producer_id_seed.seed(producer_ids, seed.get("producer_ids", ()), now_ms)
        conns = seed.get("connections", {})
        connections.seed(conns, now_ms)
        return {
            "byte-rate": len(seed.get("produce", ())) + len(seed.get("fetch", ())),
            "mutation": len(seed.get("mutation", ())),
            "producer-id": len(seed.get("producer_ids", ())),
            "ip": len(conns.get("ips", ())),
            "topic": len(seed.get("topic_produce", ())) + len(seed.get("topic_fetch", ())),
            "partition": len(seed.get("partition_produce", ())) + len(seed.get("partition_fetch", ())),
            "request-rate": len(seed.get("requests", ())) + len(seed.get("group_requests", ())),
        }
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise SeedError(f"{type(exc).__name__}: {exc}") from exc
