"""Why is this client throttled? :func:`explain` answers from a :class:`~quota.explain.state.QuotaState`. Pure.

The work is bounded whatever the number of tenants: per quota, the table's precedence levels (at most eight
lookups) and one sensor lookup, never made; per listener, a few rates; the client's open connections were gathered
by the caller (at most :data:`~quota.explain.values.MAX_LISTED_CONNECTIONS` listed).
"""

from __future__ import annotations

from quota.explain import client_quotas
from quota.explain.connections import connection_findings
from quota.explain.state import QuotaState
from quota.explain.topics import group_finding, partition_findings, topic_findings
from quota.explain.values import (
    FULL,
    NOT_THROTTLED,
    PAUSED,
    SHADOW,
    THROTTLED,
    Explanation,
    Finding,
    ProxyWide,
    VolumeFinding,
    Who,
)
from quota.managers.volume import PAUSE, THROTTLE
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    REQUEST_RATE,
)
from quota.sharing.cluster_peers import PeerView


def explain(state: QuotaState, who: Who) -> Explanation:
    now = state.now_ms
    table, shadow_mode = state.table, state.shadow_mode
    findings: list[Finding] = []
    for quota_set in state.sets:
        where = f" broker {quota_set.broker}" if quota_set.broker else ""
        for manager, key in ((quota_set.produce, PRODUCER_BYTE_RATE), (quota_set.fetch, CONSUMER_BYTE_RATE)):
            findings.append(
                client_quotas.byte_rate(
                    manager, "user/client-id" + where, table.matches(key, who.user, who.client_id), shadow_mode, now
                )
            )
        findings.append(
            client_quotas.producer_ids(
                quota_set.producer_ids, "user" + where, table.matches(PRODUCER_IDS_RATE, who.user, ""), shadow_mode, now
            )
        )
    findings.append(
        client_quotas.mutations(
            state.mutations, table.matches(CONTROLLER_MUTATION_RATE, who.user, who.client_id), shadow_mode, now
        )
    )
    findings.append(client_quotas.request_percentage())
    volume = state.volume
    if volume is not None and volume.state.state == THROTTLE:
        scaled = client_quotas.byte_rate(
            volume.produce, "volume-scaled", [volume.produce.resolve(who.user, who.client_id)], shadow_mode, now
        )
        findings.append(scaled)
    if state.topics is not None and who.topic is not None:
        findings.extend(topic_findings(state.topics, who.topic, shadow_mode, now))
        if who.partition is not None:
            findings.extend(partition_findings(state.topics, (who.topic, who.partition), shadow_mode, now))
    if state.requests is not None:
        clients = state.requests.clients
        matched = table.matches(REQUEST_RATE, who.user, who.client_id)
        findings.append(client_quotas.byte_rate(clients, "user/client-id", matched, shadow_mode, now))
        if who.group is not None:
            findings.append(group_finding(state.requests, who.group, shadow_mode, now))
    findings.extend(connection_findings(state.connections, state.listeners, who, now))
    proxy = _proxy_wide(state)
    reasons = [_reason(f) for f in findings if f.verdict in (THROTTLED, FULL, SHADOW)]
    for conn in state.open_connections:
        if conn.holds_back(who):
            waits = ", ".join(
                part
                for part in (
                    f"muted {conn.muted_ms} ms more" if conn.muted_ms else "",
                    f"a request held {conn.held_ms} ms more" if conn.held_ms else "",
                )
                if part
            )
            by = f" by {conn.muted_by}" if conn.muted_ms and conn.muted_by else ""
            reasons.append(f"connection {conn.peer} on {conn.listener}: {waits}{by} ({conn.mute_state})")
    paused = volume is not None and volume.state.state == PAUSE
    if paused:
        reasons.insert(
            0,
            "volume usage PAUSE: every produce is refused (a disk of the cluster is at its hard limit, "
            "or a broker's usage data is missing and volume_usage.missing_data_action is PAUSE)",
        )
    elif volume is not None and volume.state.state == THROTTLE:
        reasons.append(f"volume usage THROTTLE: producer_byte_rate scaled by {volume.state.factor:.3f}")
    held_back = any(f.verdict in (THROTTLED, FULL) for f in findings) or any(
        c.holds_back(who) for c in state.open_connections
    )
    verdict = PAUSED if paused else THROTTLED if held_back else NOT_THROTTLED
    return Explanation(
        who, verdict, tuple(reasons), tuple(findings), state.open_connections, state.connections_open, proxy
    )


def _reason(f: Finding) -> str:
    what = f"{f.quota} ({f.scope})"
    where = f" [{f.entity}" + (f", level {f.level} {f.level_path}" if f.level else "") + "]" if f.entity else ""
    if f.verdict == FULL:
        return f"{what}: {f.measured:.0f} open of {f.limit:.0f}{where}: a new connection is closed"
    if f.tokens is not None:
        measured = f"bucket at {f.tokens:.1f} of {f.burst:.1f} tokens"
    else:
        measured = f"{f.measured:.1f} {f.unit} measured against {f.limit:.15g}"
    verb = "would be throttled (shadow: not applied)" if f.verdict == SHADOW else "throttled"
    return f"{what}: {measured}{where}: {verb} {f.throttle_ms} ms"


def _proxy_wide(state: QuotaState) -> ProxyWide:
    volume = None
    if state.volume is not None:
        v = state.volume.state
        volume = VolumeFinding(
            v.state,
            v.factor,
            state.volume.freshness_ms,
            state.volume.missing_data_action,
            tuple(v.missing_data),
            {str(b): max(0, state.wall_ms - at) for b, at in sorted(v.snapshot_at_ms.items())[:64]},
            v.awaiting_data,
        )
    home = state.sets[0]
    tracked = {}
    for key, manager in (
        (PRODUCER_BYTE_RATE, home.produce),
        (CONSUMER_BYTE_RATE, home.fetch),
        (CONTROLLER_MUTATION_RATE, state.mutations),
    ):
        tracked[key] = [len(manager), manager.keeper.max_tracked_entities]
    tracked[PRODUCER_IDS_RATE] = [len(home.producer_ids), home.producer_ids.max_tracked_entities]
    tracked["connection_creation_rate"] = [state.connections.tracked_ips, state.connections.max_tracked_entities]
    topics_shared = state.topics_shared if state.topics is not None and state.topics.enabled else None
    cluster = cluster_budget(
        state.scope, state.workers, state.cluster_peers, state.cluster_mode, len(state.sets) > 1, topics_shared
    )
    return ProxyWide(state.shadow_mode, state.scope, cluster, volume, tracked)


def cluster_budget(
    scope: str,
    workers: int = 1,
    peers: PeerView | None = None,
    cluster_mode: bool = False,
    per_broker: bool = False,
    topics_shared: bool | None = None,
) -> str | None:
    """Who else's usage counts in a client's budget, in words (None: this process's own only); ``topics_shared``
    False: the topic quotas are not shared with the peers now (None: no topic quota, or no usage topic)."""
    parts = []
    if workers > 1:
        parts.append(
            f"one of {workers} workers: each counts the others' usage in its own rates (they lag by at most "
            "quota.workers.sync.ms)"
        )
    if scope == "cluster":
        if peers is not None and peers.fallback:
            parts.append(
                f"quota.scope cluster: no peer sidecar fresh ({peers.known} known): keeping to quota / "
                f"{peers.share_divisor}"
            )
        elif peers is not None:
            parts.append(
                f"quota.scope cluster: one budget with {peers.fresh} fresh peer sidecar(s) of {peers.known} "
                "known, their usage recorded in these rates"
            )
            if topics_shared is False and peers.known:
                parts.append(
                    "topic quotas kept per sidecar: a live sidecar does not read topic usage (an earlier release)"
                )
        elif cluster_mode:
            parts.append("quota.scope cluster: one budget for every broker behind this proxy")
    elif per_broker:
        parts.append("quota.scope broker: each broker's port keeps its own budget (Kafka's per-broker quotas)")
    return "; ".join(parts) or None
