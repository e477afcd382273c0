"""The parent's first claims of created topics (quota.sharing.first_claims): one worker charges a topic, within the
claim's time; bounded. Pure."""

from __future__ import annotations

import pytest

from quota.sharing.first_claims import FirstClaims


def test_the_first_claim_of_a_name_wins_until_its_time_ends():
    claims = FirstClaims()
    assert claims.claim("t", 1_000, 300) is True
    assert claims.claim("t", 1_200, 300) is False  # another worker, within the time: given back there
    assert claims.claim("u", 1_200, 300) is True  # another topic
    assert claims.claim("t", 1_300, 300) is True  # deleted and created again after the time: charged again
    assert claims.claim("t", 1_400, 300) is False


def test_memory_stays_bounded_and_a_forgotten_name_is_charged_again():
    claims = FirstClaims(max_names=3)
    for i in range(5):
        assert claims.claim(f"t{i}", 1_000, 60_000) is True
    assert len(claims) == 3
    assert claims.claim("t0", 1_001, 60_000) is True  # forgotten: charged again, never not at all
    assert claims.claim("t4", 1_001, 60_000) is False
    for i in range(3):
        claims.claim(f"late{i}", 70_000, 60_000)  # the earlier ones' time is over: dropped as they end
    assert len(claims) == 3


def test_a_claims_bound_is_checked():
    with pytest.raises(ValueError):
        FirstClaims(0)
