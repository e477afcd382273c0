"""The quota windows' part of the settings table (:mod:`config.settings_table`): the sampled windows and throttle
bounds of the byte-rate, controller-mutation, producer-id and request-rate quotas, by Kafka property name where Kafka
has the same knob.
"""

from __future__ import annotations

from config.setting_spec import Setting
from quota.managers.producer_ids import DEFAULT_MAX_HOLD_MS

QUOTA_WINDOW_SETTINGS: dict[str, Setting] = {
    "quota.window.num": Setting(11, int, 1, 1000, "Samples kept by the byte-rate quotas (Kafka's quota.window.num)."),
    "quota.window.size.seconds": Setting(
        1, int, 1, 3600, "Length of each sample of the byte-rate quotas (Kafka's quota.window.size.seconds)."
    ),
    "quota.mute.max.ms": Setting(
        25000,
        int,
        1,
        2**31 - 1,
        "Longest a client is muted (and the throttle_time_ms reported) for one quota violation, so a client is "
        "never held past the 30 s request timeout its requests wait under; Kafka does not cap byte-rate throttles.",
    ),
    "controller.quota.window.num": Setting(
        11,
        int,
        1,
        1000,
        "Samples of the controller mutation quota (Kafka's controller.quota.window.num); the token bucket's burst "
        "is controller_mutation_rate x num x size.",
    ),
    "controller.quota.window.size.seconds": Setting(
        1,
        int,
        1,
        3600,
        "Length of each sample of the controller mutation quota (controller.quota.window.size.seconds).",
    ),
    "controller.quota.metadata.max.age.ms": Setting(
        30000,
        int,
        0,
        2**31 - 1,
        "Partition counts the controller mutation quota learnt from Metadata responses older than this are looked "
        "up again (one Metadata request on the client's broker connection) before a DeleteTopics or "
        "CreatePartitions is decided.",
    ),
    "producer.id.quota.window.num": Setting(
        11,
        int,
        1,
        1000,
        "Windows of the active producer-id quota (KIP-936); its token bucket's burst is producer_ids_rate x num.",
    ),
    "producer.id.quota.window.size.seconds": Setting(
        3600,
        int,
        1,
        2**31 - 1,
        "The producer-id quota's window: producer_ids_rate counts new producer ids per window, and each user's "
        "bloom filter is written for half of it and read for all of it (KIP-936; default one hour).",
    ),
    "producer.id.quota.cache.cleanup.scheduler.interval.ms": Setting(
        10,
        int,
        1,
        2**31 - 1,
        "How often users whose bloom filters have all expired are dropped from the producer-id cache (KIP-936's "
        "setting; the proxy's housekeeping runs at most once a second).",
    ),
    "producer.id.quota.bloom.expected.pids": Setting(
        1000,
        int,
        1,
        100_000_000,
        "New producer ids one user's bloom filter is sized for per half window (ours; the KIP leaves it open). "
        "More than this raises the false-positive rate above the configured one.",
    ),
    "producer.id.quota.bloom.false.positive.rate": Setting(
        0.001,
        float,
        1e-9,
        0.5,
        "False-positive rate of each bloom filter at its expected size: the share of new producer ids mistaken "
        "for known ones (and so not counted; never a wrong throttle).",
    ),
    "producer.id.quota.max.hold.ms": Setting(
        DEFAULT_MAX_HOLD_MS,
        int,
        0,
        600_000,
        "producer.id.quota.enforcement hold: the longest a Produce bringing a new producer id is held in the proxy, "
        "before the broker sees it, waiting for its user's bucket; one that would wait longer is answered at once "
        "with the retriable NOT_ENOUGH_REPLICAS and throttle_time_ms. Kept well below clients' 30 s request timeout "
        "(the hold counts against it); at most quota.mute.max.ms and below upstream.response.timeout.ms (the "
        "default is the lowest of 10000, quota.mute.max.ms and half upstream.response.timeout.ms).",
    ),
    "quota.request.rate.max.throttle.ms": Setting(
        2000,
        int,
        1,
        60_000,
        "Longest throttle (and mute) one request_rate violation gives, at most quota.mute.max.ms: a muted connection "
        "also carries the consumer's heartbeats, so keep it well below the consumers' session.timeout.ms (45 s by "
        "default; Kafka's group.min.session.timeout.ms is 6 s: the default is a third of that). Kafka bounds its request quota's throttle at one "
        "quota.window.size.seconds; a bound shorter than the rate asks lets each connection send one request a bound.",
    ),
}
