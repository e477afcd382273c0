"""quota.primitives.rate: which rate a process uses, and why it says so. The C twin when it is built and not switched
off; the pure class otherwise (a machine without a compiler installs without it: its import fails)."""

from __future__ import annotations

from quota.primitives import rate
from quota.primitives.compiled import load_compiled


def test_the_rate_asks_the_package_rule_for_its_twin():
    assert rate._load() == load_compiled("quota.primitives._rate")  # tests/quota/primitives/test_compiled.py


def test_the_rate_is_the_class_over_the_twin_or_the_pure_one():
    if rate._TWIN is None:
        assert rate.Rate is rate.PureRate and rate.RATE_PATH.startswith("pure Python")
    else:
        assert rate.Rate.__mro__[1] is rate._TWIN.Rate and rate.RATE_PATH == "C extension"
        assert rate.Rate.__module__ == rate.__name__ and rate.Rate.__qualname__ == "Rate"  # pickled by this name
