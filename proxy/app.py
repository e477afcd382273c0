"""The running proxy: listeners, the operations endpoint, readiness, and orderly shutdown."""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from typing import TYPE_CHECKING

from config.admin_listener import admin_listener_warnings
from config.model import ProxyConfig
from config.own_clients import own_client_warnings
from config.quota_groups import quota_group_warnings
from proxy.apis import ConnectionScope
from proxy.broker_listeners import BrokerListeners
from proxy.cluster import own_clients
from proxy.cluster.admin_address import AdminAddress
from proxy.cluster.broker_ports import BrokerPorts
from proxy.cluster.created_counts import CreatedCounts
from proxy.cluster.creation_claims import CreationClaims
from proxy.cluster.discovery import BrokerDiscovery
from proxy.cluster.kafka_clients import OwnKafka
from proxy.cluster.own_clients import track_aiokafka
from proxy.cluster.token_owners import TokenOwners
from proxy.cluster.topics import Topics
from proxy.connection.client_socket import ClientConnection
from proxy.connection.descriptors import DescriptorBudget, open_files_limit, reserved
from proxy.connection.listener import Listener
from proxy.connection.open_gate import OpenGate
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ground.identity import proxy_id
from proxy.ground.quiet import quiet
from proxy.ground.tasks import cancel_and_wait
from proxy.housekeeping import housekeep
from proxy.listener_contexts import ListenerContexts
from proxy.ops.connection_metrics import ConnectionMetricsCollector
from proxy.ops.connection_state import ConnectionStateCollector
from proxy.ops.entity_series import EntitySeries
from proxy.ops.explain import Explainer
from proxy.ops.http import OpsServer
from proxy.ops.metrics import ProxyMetrics
from proxy.ops.quota_metrics import QuotaMetricsCollector
from proxy.ops.readiness import Readiness
from proxy.ops.runtime import register_runtime
from proxy.ops.usage_log import UsageLog
from proxy.ops.usage_table import NO_USAGE
from quota.managers.connection import CONNECTION_CREATION_RATE, ConnectionQuotas

if TYPE_CHECKING:
    from proxy.observers.cluster_usage import ClusterUsage
    from proxy.observers.dynamic_config import DynamicConfig

log = logging.getLogger(__name__)


class ProxyApp:
    def __init__(
        self,
        config: ProxyConfig,
        metrics: ProxyMetrics | None = None,
        reuse_port: bool = False,
        shares_usage_topic: bool = True,
    ) -> None:
        """``reuse_port``: one of several workers on the same ports (proxy.workers); ``shares_usage_topic`` False:
        such a worker, whose parent publishes and follows ``quota.cluster.topic`` for every worker."""
        self.config = config
        self.reuse_port = reuse_port
        self.shares_usage_topic = shares_usage_topic
        self.metrics = metrics or ProxyMetrics()
        register_runtime(self.metrics.registry)  # process_*, python_*, build_info, memory_limit_bytes
        self.metrics.inflight_max_requests.set(config.settings.connections_max_inflight_requests)
        self.metrics.buffered_response_max_bytes.set(config.settings.connections_max_buffered_response_bytes)
        connect_timeout_s = config.settings.upstream_connect_timeout_ms / 1000.0
        self.upstream_ssl = config.upstream.tls.context() if config.upstream.tls is not None else None
        # the broker the listeners forward to (readiness, cluster-mode discovery), and the proxy's own traffic (its
        # topics, their creation, metadata looks, DescribeLogDirs): upstream.own_clients when set, else the same
        self.upstream_kafka = OwnKafka(config.upstream.bootstrap_servers, self.upstream_ssl, config.upstream.sasl)
        self.kafka = (
            OwnKafka.of(config.upstream.own_clients) if config.upstream.own_clients is not None else self.upstream_kafka
        )
        self.readiness = Readiness(self.upstream_kafka, connect_timeout_s, self.metrics)
        self.connections: set[ClientConnection] = set()
        limit = open_files_limit()
        self.descriptors = DescriptorBudget(
            self.connections, limit, reserved(limit, config.settings.connections_reserved_file_descriptors)
        )
        self.topics = Topics(config.settings.metadata_max_tracked_topics)  # the cluster's topics, proxy-wide
        self.created_counts = CreatedCounts(
            self.kafka,
            connect_timeout_s,  # -1 creates a v4 answer gave no count of
            on_unknown=self.metrics.controller_mutation_partitions_unknown.inc,
        )
        self.token_owners = TokenOwners(
            self.kafka,
            connect_timeout_s,  # who a delegation-token login authenticates
            on_refused=self.metrics.delegation_token_logins_refused.inc,
            on_lookup=lambda r: self.metrics.delegation_token_lookups.labels(r).inc(),
        )
        self.quotas = ProxyQuotas(config)
        held = self.quotas.held_bytes
        self.metrics.producer_ids_held_bytes.set_function(lambda: held.total)
        self.metrics.producer_ids_held_max_bytes.set(held.max_total)
        quota_metrics = QuotaMetricsCollector(self.quotas)
        self.metrics.registry.register(quota_metrics)
        quota_metrics.series = EntitySeries(
            quota_metrics.render,
            quota_metrics.entities,
            self.quotas.clock,
            config.settings.quota_metrics_refresh_ms,
            quiet=quiet,
        )
        self.open_gate = OpenGate()  # workers: the link attaches it to the parent
        self.creation_claims = CreationClaims()  # workers: the link attaches it to the parent
        self.connection_quotas = ConnectionQuotas(
            [lc.name for lc in config.listeners], self.quotas.window, config.connections
        )
        self.connection_quotas.max_tracked_entities = config.settings.quota_max_tracked_entities  # per-IP rates
        self.quotas.overflow_sources.append((CONNECTION_CREATION_RATE, self.connection_quotas))
        self.effective_config = config  # YAML, with the dynamic configuration laid over it
        self.dynamic: DynamicConfig | None = None
        if config.dynamic_config is not None:
            from proxy.observers.dynamic_config import DynamicConfig
            from proxy.ops.dynamic_metrics import DynamicConfigCollector

            self.dynamic = DynamicConfig(config, self._apply_config, self.kafka)
            self.metrics.registry.register(DynamicConfigCollector(self.dynamic))
        self.metrics.registry.register(ConnectionMetricsCollector(self.connection_quotas, self.quotas.clock))
        self.metrics.registry.register(
            ConnectionStateCollector(
                self.connections, [lc.name for lc in config.listeners], config.settings.quota_metrics_max_entities
            )
        )
        self.usage_log = (
            UsageLog(
                config.usage_log,
                self.metrics,
                scope=config.settings.quota_scope,
                max_rows=config.settings.quota_max_tracked_entities,
            )
            if config.usage_log is not None
            else None
        )
        if self.usage_log is not None:
            self.usage_log.groups = lambda: self.quotas.table.groups  # each record names its client's quota group
        self.contexts = ListenerContexts(
            config,
            metrics=self.metrics,
            on_upstream_result=self.readiness.report,
            connections=self.connections,
            connection_quotas=self.connection_quotas,
            clock=self.quotas.clock,
            upstream_ssl=self.upstream_ssl,
            open_gate=self.open_gate,
            descriptors=self.descriptors,
            usage=self.usage_log.table if self.usage_log is not None else NO_USAGE,
        )
        self.listeners: list[Listener] = []
        scopes: dict[str, ConnectionScope] = {}
        # cluster mode: a port per broker
        self.broker_listeners = BrokerListeners(scopes, self.contexts.make, self.quotas, self.connections, reuse_port)
        track_aiokafka()  # the proxy's own clients' connections are known as such when they reach its listeners
        self.guard = InternalTopicGuard(
            self.quotas.internal_topics,
            config.admin_principals,
            refused_counter=self.metrics.internal_topic_writes_refused,
        )
        for lc in config.listeners:
            cluster = None
            if lc.broker_port_base is not None:  # cluster mode
                cluster = BrokerPorts(
                    lc.name, lc.advertised, lc.broker_port_base, functools.partial(self.broker_listeners.open, lc)
                )
            admin = AdminAddress(lc.advertised, lc.bind.port) if lc.admin else None
            scope = scopes[lc.name] = ConnectionScope(
                cluster=cluster,
                topics=self.topics,
                quotas=self.quotas.home,
                client_quotas=self.dynamic,
                guard=self.guard,
                counts=self.created_counts,
                claims=self.creation_claims,
                tokens=self.token_owners,
                admin_address=admin,
            )
            bootstrap = config.upstream.bootstrap_servers
            self.listeners.append(
                Listener(self.contexts.make(lc.name, lambda: bootstrap, scope), lc.bind.host, lc.bind.port, reuse_port)
            )
        settings = config.settings
        self.discovery = BrokerDiscovery(
            self.upstream_kafka,
            [s.cluster for s in scopes.values() if s.cluster is not None],
            timeout_s=settings.upstream_connect_timeout_ms / 1000.0,
            refresh_s=settings.cluster_metadata_refresh_ms / 1000.0,
            removal_s=settings.cluster_broker_removal_ms / 1000.0,
            close_broker=self.broker_listeners.close,
            now=time.monotonic,
        )
        self.draining = False  # shutting down: /readyz says not ready while in-flight requests finish
        # not ready before the config topic has been read to its end once (or found unreadable: the YAML applies)
        self.explainer = Explainer(self)

        async def explain(query: bytes) -> tuple[str, str, bytes]:
            return self.explainer.answer(query)

        self.ops = OpsServer(
            self.metrics.registry,
            self.not_ready,
            series=quota_metrics.series,
            ready_note=self.ready_note,
            explain=explain,
        )
        self.metrics.ready.set_function(lambda: 1 if self.is_ready() else 0)
        self.ops_address: tuple[str, int] | None = None
        self._housekeeping: asyncio.Task | None = None
        self._volume_tasks: list = []  # the volume-usage follower and publisher, when configured
        self.cluster_usage: ClusterUsage | None = (
            None  # quota.scope cluster on sidecars: the usage topic's publisher and follower
        )

    def not_ready(self) -> str | None:
        """Why /readyz says 503 (and the ready gauge 0), or None when ready: the broker answers, the config topic was
        read to its end once (or found unreadable: the YAML applies), every broker port is open (cluster mode), and
        the proxy is not shutting down. Plain reads only: scrapes call it from their own thread."""
        if self.draining:
            return "shutting down"
        if not self.accepting:
            return "not accepting yet: waiting for a peer's quota state"
        if not self.readiness.ready:
            return "broker unreachable"
        if not self.discovery.ready:
            return "the cluster's broker ports are not open yet"
        if self.dynamic is not None and not self.dynamic.caught_up.is_set():
            return "the config topic has not been read to its end yet"
        return None

    def ready_note(self) -> str | None:
        """A detail /readyz adds while ready: a sidecar keeping to its per-broker share (quota.scope cluster)."""
        usage = self.cluster_usage
        return None if usage is None else usage.note

    def is_ready(self) -> bool:
        return self.not_ready() is None

    def _apply_config(self, config: ProxyConfig) -> None:
        """A new effective configuration from the dynamic config: every manager takes it in this one step."""
        self.quotas.apply(config)
        self.connection_quotas.configure(config.connections)
        self.effective_config = config

    async def start(self, accept: bool = True) -> None:
        """Start serving; ``accept`` False: everything but the listeners (a restarted worker opens them with
        :meth:`start_accepting` once it holds its peers' quota state)."""
        await self.readiness.check()
        if accept:
            await self.start_accepting()
        await self._warn_own_clients()
        # the proxy's own clients (started below, and only they) reach the broker behind a sidecar listener directly
        route = own_clients.ROUTE.set(self._own_client_route())
        try:
            await self._start_own_clients()
        finally:
            own_clients.ROUTE.reset(route)
        bind = self.config.metrics.bind
        self.ops_address = await self.ops.start(bind.host, bind.port)
        log.info("metrics on http://%s:%d/metrics", *self.ops_address)
        self.readiness.start()
        self._housekeeping = asyncio.get_running_loop().create_task(
            housekeep(
                self.quotas,
                self.connection_quotas,
                self.config.settings.producer_id_quota_cache_cleanup_scheduler_interval_ms,
            )
        )

    accepting = False

    async def start_accepting(self) -> None:
        """Open the listeners (in cluster mode the brokers' ports too) and the usage log named after them."""
        for listener in self.listeners:
            address = await listener.start()
            log.info("listener %s on %s:%d", listener.ctx.name, *address)
            if listener.ctx.scope.admin_address is not None:
                listener.ctx.scope.admin_address.port = address[1]  # what its clients are given (a configured 0)
        for warning in admin_listener_warnings(self.config) + quota_group_warnings(self.config.quotas):
            log.warning("%s", warning)
        budget = self.descriptors
        log.info(
            "open-files limit %d: at most %d client connections, %d descriptors kept for the proxy itself "
            "(connections.reserved.file.descriptors)",
            budget.limit,
            budget.max_connections,
            budget.reserved,
        )
        self.discovery.start()  # cluster mode: every broker's port opened at once, /readyz ready after
        self.accepting = True
        if self.usage_log is not None:
            self.usage_log.proxy_id = proxy_id(self.config.settings, (a[1] for a in self.listener_addresses.values()))
            self.usage_log.start()

    def _own_client_route(self):
        return own_clients.sidecar_route(self.config, {lc.bind.port for lc in self.config.listeners if lc.sidecar})

    async def _warn_own_clients(self) -> None:
        """A layout whose own clients other sidecars will refuse, said at start-up (check-config says it too), with
        the cluster's broker count when the broker answers (one broker: nothing to warn of)."""
        if not own_client_warnings(self.config):
            return
        look = await self.upstream_kafka.look((), self.config.settings.upstream_connect_timeout_ms / 1000.0)
        for warning in own_client_warnings(self.config, None if look is None else len(look.brokers)):
            log.warning("%s", warning)

    async def _start_own_clients(self) -> None:
        if self.dynamic is not None:
            await self.dynamic.start()
        if self.quotas.volume is not None:  # volume_usage configured
            from proxy.observers.volume_sources import volume_sources

            timeout_s = self.config.settings.upstream_connect_timeout_ms / 1000.0
            self._volume_tasks = volume_sources(
                self.quotas.volume, self.kafka, timeout_s, self.metrics, self.volume_source
            )
            for task in self._volume_tasks:
                await task.start()
        if self.config.settings.quota_cluster_topic is not None and self.shares_usage_topic:  # issue 26
            from proxy.observers.cluster_usage import ClusterUsage

            self.cluster_usage = ClusterUsage.for_app(self)
            await self.cluster_usage.start()

    volume_source = None  # tests and the demo inject a simulated volume source for the publisher
    usage_kafka = None  # where the usage topic is (quota.cluster.topic), when not on this sidecar's broker's cluster:
    # bench/cluster_budget.py's one-broker Tansu clusters share the first one's (an OwnKafka)

    @property
    def listener_addresses(self) -> dict[str, tuple[str, int]]:
        return {listener.ctx.name: listener.address for listener in self.listeners if listener.address is not None}

    async def stop(self, grace_ms: int | None = None) -> None:
        """Stop accepting, let in-flight requests finish for up to the grace period, then close everything."""
        if grace_ms is None:
            grace_ms = self.config.settings.shutdown_grace_period_ms
        self.draining = True
        for task in self._volume_tasks:  # first: they reach the broker through this proxy's own listener
            await task.stop()
        if self.cluster_usage is not None:
            await self.cluster_usage.stop()
        if self.dynamic is not None:
            await self.dynamic.stop()
        for listener in [*self.listeners, *self.broker_listeners.listeners.values()]:
            await listener.close()
        for conn in list(self.connections):
            conn.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_ms / 1000.0
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            log.warning(
                "closing client %s: shutdown grace period over with requests in flight (%s)",
                conn.peer,
                conn.flow.mute_state,
            )
            conn.abort()
        await self.readiness.stop()
        await self.discovery.stop()
        await self.created_counts.stop()
        await self.token_owners.stop()
        if self.usage_log is not None:
            await self.usage_log.stop()  # the current interval is written
        await cancel_and_wait(self._housekeeping)
        await self.ops.close()

    async def run_until_signal(self) -> None:
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_requested.set)
        await self.start()
        await stop_requested.wait()
        log.info("signal received: stopping (grace %d ms)", self.config.settings.shutdown_grace_period_ms)
        await self.stop()
