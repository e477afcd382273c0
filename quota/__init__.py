"""The pure quota core: plain values in, plain values (throttle times, decisions) out.

No I/O, no event loop, no metrics library and no system clock here: time is injected through a :class:`Clock`,
and only ``proxy/`` acts on what the managers decide.
"""

from quota.managers.client_quota import INACTIVE_SENSOR_EXPIRATION_MS, ClientQuotaManager
from quota.primitives.clock import Clock, ManualClock
from quota.primitives.decision import FORWARD, Decision, Forward, Throttle, combined, is_applied, shadowed
from quota.primitives.entity import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    QuotaEntry,
    QuotaTags,
    ResolvedQuota,
)
from quota.primitives.quota_table import EMPTY_QUOTA_TABLE, QuotaTable
from quota.primitives.rate import DEFAULT_QUOTA_WINDOW_NUM, DEFAULT_QUOTA_WINDOW_SIZE_SECONDS, QuotaWindow, Rate
from quota.primitives.sensor import ClientSensors, EntityStats
from quota.primitives.throttle import INT32_MAX, bounded_throttle_time_ms, quota_acceptable, throttle_time_ms

__all__ = [
    "CLIENT_ID",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "DEFAULT",
    "DEFAULT_QUOTA_WINDOW_NUM",
    "DEFAULT_QUOTA_WINDOW_SIZE_SECONDS",
    "EMPTY_QUOTA_TABLE",
    "FORWARD",
    "INACTIVE_SENSOR_EXPIRATION_MS",
    "INT32_MAX",
    "PRODUCER_BYTE_RATE",
    "PRODUCER_IDS_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "USER",
    "ClientQuotaManager",
    "ClientSensors",
    "Clock",
    "Decision",
    "EntityStats",
    "Forward",
    "ManualClock",
    "QuotaEntity",
    "QuotaEntry",
    "QuotaTable",
    "QuotaTags",
    "QuotaWindow",
    "Rate",
    "ResolvedQuota",
    "Throttle",
    "bounded_throttle_time_ms",
    "combined",
    "is_applied",
    "quota_acceptable",
    "shadowed",
    "throttle_time_ms",
]
