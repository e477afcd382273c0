"""The table of the ``settings:`` section: every broker-style setting by Kafka property name, with its default,
bounds and what it does, and the names of the settings that take words, not numbers.

What the table says is checked, and the connection limits built, by :mod:`config.settings`.
"""

from __future__ import annotations

from config.quota_settings_table import QUOTA_WINDOW_SETTINGS
from config.setting_spec import Setting
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES

# Settings under `settings:`; Kafka broker property names where Kafka has the same knob.
SETTINGS: dict[str, Setting] = {
    "socket.request.max.bytes": Setting(
        104857600, int, 1024, 2**31 - 1, "Largest request frame accepted from a client; larger closes the connection."
    ),
    "upstream.response.max.bytes": Setting(
        104857600,
        int,
        1024,
        2**31 - 1,
        "Largest response frame accepted from the broker; larger closes that client's connection "
        "(default as socket.request.max.bytes). Only responses the proxy decodes are buffered, up to this size.",
    ),
    "connections.max.inflight.requests": Setting(
        5,
        int,
        1,
        1_000_000,
        "Requests one client connection may have awaiting an answer; at the bound the proxy stops reading that "
        "client until answers go out (a Kafka broker reads one request per connection at a time). Default 5, the Java "
        "producer's max.in.flight.requests.per.connection: a churned connection costs a few requests, not all it sent.",
    ),
    "connections.max.buffered.response.bytes": Setting(
        1048576,
        int,
        1024,
        2**31 - 1,
        "Response bytes waiting for one client to read them; above this the proxy stops reading that client's "
        "broker connection and, at the next request boundary, the client itself.",
    ),
    "connections.max.held.request.bytes": Setting(
        2097152,
        int,
        0,
        2**31 - 1,
        "producer.id.quota.enforcement hold: bytes of Produce requests one client connection may have held in the "
        "proxy for their new producer ids; a Produce whose hold would pass it is refused with the retriable "
        "NOT_ENOUGH_REPLICAS instead (default 2 MiB: above a producer's largest request at its defaults, Java's "
        "max.request.size 1 MiB and librdkafka's message.max.bytes 1 MB).",
    ),
    "max.held.request.bytes": Setting(
        67108864,
        int,
        0,
        2**63 - 1,
        "producer.id.quota.enforcement hold: bytes of Produce requests held for their new producer ids across the "
        "proxy process (each worker its own); a Produce whose hold would pass it is refused with the retriable "
        "NOT_ENOUGH_REPLICAS instead (default 64 MiB).",
    ),
    "socket.send.buffer.bytes": Setting(
        -1,
        int,
        -1,
        2**31 - 1,
        "SO_SNDBUF of each client connection (Kafka's broker setting; its default there is 102400); -1 leaves the "
        "kernel's own, which grows with the traffic up to net.ipv4.tcp_wmem's maximum.",
    ),
    "socket.receive.buffer.bytes": Setting(
        -1,
        int,
        -1,
        2**31 - 1,
        "SO_RCVBUF of each client connection (Kafka's broker setting; its default there is 102400); -1 leaves the "
        "kernel's own, which grows with the traffic up to net.ipv4.tcp_rmem's maximum.",
    ),
    "shutdown.grace.period.ms": Setting(
        10000, int, 0, 3_600_000, "On SIGTERM/SIGINT, how long in-flight requests may take to finish."
    ),
    "upstream.connect.timeout.ms": Setting(
        5000, int, 1, 600_000, "Time allowed to open the broker connection for a new client connection."
    ),
    "request.header.max.bytes": Setting(
        65536,
        int,
        1024,
        2**31 - 1,
        "Longest request header (client id and tagged fields) the proxy reads; a longer one closes the connection.",
    ),
    "listener.tls.handshake.timeout.ms": Setting(
        10000,
        int,
        100,
        600_000,
        "Time a client has to complete the TLS handshake on a TLS listener; the broker connection is opened only "
        "after it has.",
    ),
    "connections.max.idle.ms": Setting(
        600000,
        int,
        1000,
        2**31 - 1,
        "A client connection with nothing in flight that sends nothing for this long is closed (Kafka's setting).",
    ),
    "upstream.response.timeout.ms": Setting(
        300000,
        int,
        1000,
        2**31 - 1,
        "Longest the proxy waits for the broker to answer a request before closing that client's connection.",
    ),
    **QUOTA_WINDOW_SETTINGS,
    "offset.metadata.max.bytes": Setting(
        4096,
        int,
        0,
        2**31 - 1,
        "Longest metadata (characters) an OffsetCommit or TxnOffsetCommit may carry per partition (Kafka's broker "
        "setting, same default): a longer one is answered OFFSET_METADATA_TOO_LARGE by the proxy and never reaches "
        "the broker. While a volume is at PAUSE the bound is 0: commits go on without metadata.",
    ),
    "metadata.max.tracked.topics": Setting(
        50000,
        int,
        1,
        2**31 - 1,
        "Topics the proxy keeps facts of (topic ids, partition counts), learnt from the brokers' answers, per "
        "process; past it the least recently used is dropped and looked up again when needed. Only topics a broker "
        "says exist are kept: names a client makes up take no room.",
    ),
    "cluster.metadata.refresh.ms": Setting(
        30000,
        int,
        100,
        2**31 - 1,
        "Cluster mode: how often the proxy asks the cluster for its brokers (Metadata, no topics) to open the port "
        "of every broker; at start-up it asks at once and retries with backoff until a bootstrap server answers.",
    ),
    "cluster.broker.removal.ms": Setting(
        300000,
        int,
        0,
        2**31 - 1,
        "Cluster mode: a broker absent from the cluster's answers this long has its port closed, and its "
        "connections closed; a broker that comes back gets the same port.",
    ),
    "sasl.server.max.receive.size": Setting(
        524288,
        int,
        1024,
        2**31 - 1,
        "On a listener marked sasl: true, the largest frame a client may send before it has authenticated "
        "(Kafka's setting of the same name); larger closes the connection.",
    ),
    "max.connection.creation.rate": Setting(
        2**31 - 1,
        int,
        1,
        2**31 - 1,
        "New client connections accepted per second across the proxy's listeners (KIP-612's broker-wide limit; "
        "the internal listener is exempt when there are others). Over it, accepting waits (at most one quota "
        "window) and new connections queue in the kernel's backlog. Per listener: "
        "listener.name.<name>.max.connection.creation.rate.",
    ),
    "max.connections": Setting(
        2**31 - 1,
        int,
        1,
        2**31 - 1,
        "Client connections open at once across the proxy (KIP-402; the internal listener is exempt when there are "
        "others); a new connection over it is closed at once. Per listener: listener.name.<name>.max.connections.",
    ),
    "connections.reserved.file.descriptors": Setting(
        -1,
        int,
        -1,
        2**31 - 1,
        "File descriptors of the proxy's open-files limit (RLIMIT_NOFILE, per process) kept for itself: its listeners, "
        "operations port, own Kafka clients and splice pipes. A client connection takes two (its socket and its broker "
        "connection's); one that would leave fewer than this many free is closed at once (connections_closed reason "
        "fd_reserve), so a connection flood never makes the proxy run out. -1: a tenth of the limit, at least 256 "
        "and at most half. Read at start-up.",
    ),
    "max.connections.per.ip": Setting(
        2**31 - 1,
        int,
        0,
        2**31 - 1,
        "Client connections open at once from one IP address (Kafka's setting); a new one over it is closed at once.",
    ),
    "workers": Setting(
        1,
        int,
        1,
        256,
        "Proxy processes serving the same listeners (SO_REUSEPORT), supervised by one parent that restarts a worker "
        "that dies and serves /metrics and /readyz; the workers share one quota state. About one per core.",
    ),
    "workers.heartbeat.timeout.ms": Setting(
        5000,
        int,
        1000,
        600_000,
        "With workers > 1: a worker that sends its parent nothing (it sends a heartbeat every 500 ms) for this long "
        "is killed and restarted, as one that died is; /readyz answers 503 from half of it until the new one serves. "
        "A stopped or stuck worker would otherwise keep its share of new connections waiting.",
    ),
    "quota.workers.sync.ms": Setting(
        20,
        int,
        5,
        10_000,
        "With workers > 1: how often each worker sends the others the quota usage it recorded since the last sync; "
        "a worker's view of a tenant's usage lags the others' by about this much. A worker also syncs early (at most "
        "every quarter interval) when one entity's unsent usage passes 5 % of its quota per second.",
    ),
    "quota.cluster.sync.ms": Setting(
        1000,
        int,
        50,
        60_000,
        "quota.scope cluster with quota.cluster.topic: how often each sidecar (or replica) publishes one record of the "
        "usage its clients had since its last sync to the usage topic; the others' view of it lags by about this much.",
    ),
    "quota.cluster.stale.ms": Setting(
        10_000,
        int,
        100,
        3_600_000,
        "quota.scope cluster on sidecars: a peer sidecar whose last usage record is older than this stops counting; "
        "while no peer is fresh, a sidecar keeps to its per-broker share (quota / live sidecars).",
    ),
    "quota.cluster.forget.ms": Setting(
        60_000,
        int,
        100,
        86_400_000,
        "quota.scope cluster on sidecars: a peer sidecar not heard from for this long while the usage topic goes on "
        "(other sidecars' records, or this one's own) is forgotten: no longer one of the live sidecars the fallback "
        "share divides the quota by. At least quota.cluster.stale.ms.",
    ),
    "quota.cluster.record.max.bytes": Setting(
        786_432,
        int,
        4096,
        64 * 2**20,
        "quota.scope cluster on sidecars: the most a usage record may take (compressed); keep it below the usage "
        "topic's max.message.bytes (Kafka's default 1 MiB). Entities that would not fit are sent at a later sync, "
        "those using the most of their quota first (cluster_usage_carried_entities).",
    ),
    "quota.max.tracked.entities": Setting(
        DEFAULT_MAX_TRACKED_ENTITIES,
        int,
        100,
        100_000_000,
        "Entities one quota tracks on its own: byte-rate sensors (producer_byte_rate, consumer_byte_rate; per broker "
        "under quota.scope broker), producer_ids_rate users, controller_mutation_rate buckets, request_rate entities "
        "and groups, per-IP connection_creation_rate rates; past it a new entity is counted in one <overflow> entity per quota, local "
        "and peers' usage alike.",
    ),
    "quota.metrics.max.entities": Setting(
        1000,
        int,
        1,
        1_000_000,
        "Quota entities with their own metric labels; the rest are summed under user/client_id '__other__'.",
    ),
    "quota.metrics.refresh.ms": Setting(
        15_000,
        int,
        0,
        3_600_000,
        "Above 100,000 quota entities, the per-entity quota series are built in the background this often and a "
        "scrape serves the last build (each value at most this old); 0: every scrape builds them.",
    ),
}


# Per-listener settings, as Kafka prefixes them: listener.name.<name>.<setting>
LISTENER_SETTINGS = ("max.connection.creation.rate", "max.connections")
IP_OVERRIDES = "max.connections.per.ip.overrides"  # Kafka's "<ip>:<count>,<ip>:<count>", or a mapping
QUOTA_MODE = "quota.mode"  # enforce or shadow: every quota of the proxy computed and metered, none applied
# hold (new producer ids over quota wait in the proxy before the broker sees them) or throttle (KIP-936's behaviour:
# forwarded, then throttled)
PRODUCER_ID_ENFORCEMENT = "producer.id.quota.enforcement"
# broker (Kafka's semantics: byte-rate and producer-id budgets per broker, one set of managers per broker port in
# cluster mode) or cluster (one budget for the whole cluster behind this proxy: cluster mode, or quota.cluster.topic)
QUOTA_SCOPE = "quota.scope"
SCOPES = ("broker", "cluster")
# quota.scope cluster with a usage topic (issue 26): the compacted topic every sidecar (or cluster-mode replica)
# publishes its usage to and follows, and this proxy's key there (default: the host name and its first listener's port)
CLUSTER_TOPIC = "quota.cluster.topic"
CLUSTER_ID = "quota.cluster.id"
# off (Kafka's sampled-rate throttle, exactly) or on (a token bucket per entity spreads a throttled client's bytes into
# short, frequent delays: quota.smoothing); YAML 1.1 reads a bare on/off as true/false, taken as the same
QUOTA_SMOOTHING = "quota.smoothing"
SMOOTHING_VALUES = ("off", "on")
# auto (the rest of large streamed frames moves socket to socket with splice(2) where the platform has it and neither
# side is TLS) or off (every byte is copied through the proxy)
SPLICE = "connections.splice"
SPLICE_MODES = ("auto", "off")
# the APIs whose requests request_rate quotas count: Kafka's API names, comma-separated as Kafka lists, or a YAML list
REQUEST_RATE_APIS = "quota.request.rate.apis"
