"""A producer-id quota manager for alice with the settings the producer-id tests vary."""

from __future__ import annotations

from quota.managers.producer_ids import HOLD, ProducerIdQuotaManager
from quota.primitives.quota_table import QuotaTable

WINDOW_S = 10


def manager(rate=2, num=2, max_hold_ms=10_000, max_mute_ms=25_000, enforcement=HOLD, **kw):
    """``rate`` new ids per 10 s window for alice: a token every 10 / rate s, a burst of rate x num."""
    table = QuotaTable.from_values([({"user": "alice"}, {"producer_ids_rate": rate})])
    return ProducerIdQuotaManager(
        table,
        window_num=num,
        window_size_s=WINDOW_S,
        expected_pids=100,
        max_mute_ms=max_mute_ms,
        enforcement=enforcement,
        max_hold_ms=max_hold_ms,
        **kw,
    )
