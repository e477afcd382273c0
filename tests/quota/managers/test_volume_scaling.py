"""The produce quotas volume usage scales while it throttles (issue 23 item 6): a shadow entry stays shadow, scaled
and metered but never applied; enforced entries and the base rate are applied, scaled."""

from __future__ import annotations

import pytest

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.volume_scaling import ScaledProduceQuotas, scaled_produce_table
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle, is_applied
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

P = PRODUCER_BYTE_RATE
TABLE = QuotaTable.from_values(
    [
        ({"user": "alice"}, {P: 4000}, True),  # mode: shadow
        ({"user": "bob"}, {P: 4000}),
        ({"user": "carol"}, {"consumer_byte_rate": 1}, True),
    ]
)


def manager(factor: float, table: QuotaTable = TABLE, shadow: bool = False) -> ClientQuotaManager:
    return ClientQuotaManager(
        ScaledProduceQuotas(table, factor, 1000), P, ManualClock(0), QuotaWindow(), 25_000, shadow=shadow
    )


def test_a_shadow_entry_stays_shadow_when_volume_usage_scales_it():
    produce = manager(0.5)  # alice and bob: 2000 B/s; everyone else the base rate, 500 B/s
    alice, bob = produce.record_and_decide("alice", "c", 100_000, 0), produce.record_and_decide("bob", "c", 100_000, 0)
    assert isinstance(alice, Throttle) and alice.shadow and not is_applied(alice)  # metered, never applied
    assert isinstance(bob, Throttle) and is_applied(bob) and bob.throttle_time_ms == alice.throttle_time_ms
    stats = {s.tags.user: s for s in produce.stats()}
    assert stats["alice"].limit == 2000 and stats["alice"].throttle_time_ms_total == 0
    assert stats["alice"].shadow_throttle_time_ms_total == alice.throttle_time_ms
    assert stats["bob"].throttle_time_ms_total == bob.throttle_time_ms
    # an entry with no producer_byte_rate (shadow or not) does not cover produce: the base rate, enforced
    carol = produce.record_and_decide("carol", "c", 100_000, 0)
    assert is_applied(carol) and produce.resolve("carol", "c").limit == 500
    assert produce.record_and_decide("dave", "d", 1, 0) is FORWARD  # the base rate is per client-id


def test_the_view_resolves_as_the_table_scaled_whole_shadow_included():
    view, whole = ScaledProduceQuotas(TABLE, 0.25, 1000), scaled_produce_table(TABLE, 0.25, 1000)
    for user in ("alice", "bob", "carol", "nobody"):
        resolved = view.resolve(P, user, "c")
        assert resolved == whole.resolve(P, user, "c")
        assert resolved.shadow == (user == "alice")
    assert view.limit(P, "alice", "c") == pytest.approx(1000) and view.limit(P, "nobody", "c") == 250


def test_proxy_wide_shadow_mode_keeps_every_scaled_quota_shadow():
    produce = manager(0.5, shadow=True)
    for user in ("alice", "bob", "dave"):
        decision = produce.record_and_decide(user, "c", 100_000, 0)
        assert isinstance(decision, Throttle) and not is_applied(decision)
