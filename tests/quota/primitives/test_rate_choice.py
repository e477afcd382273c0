"""quota.primitives.rate: which rate a process uses, and why it says so. The C twin when it is built and not switched
off; the pure class otherwise (a machine without a compiler installs without it: its import fails)."""

from __future__ import annotations

import sys

import quota.primitives
from quota.primitives import rate


def test_the_twin_when_built_the_pure_class_when_switched_off_or_missing(monkeypatch):
    monkeypatch.delenv(rate.PURE_ENV, raising=False)
    twin, path = rate._load()
    if twin is not None:  # built here (the dev install compiles it where gcc is)
        assert path == "C extension"
    monkeypatch.setenv(rate.PURE_ENV, "1")
    assert rate._load() == (None, f"pure Python ({rate.PURE_ENV} is set)")
    monkeypatch.setenv(rate.PURE_ENV, "0")  # 0 or empty: not switched off
    assert rate._load()[0] is twin
    monkeypatch.setitem(sys.modules, "quota.primitives._rate", None)  # as on a machine where it was never built
    monkeypatch.delattr(quota.primitives, "_rate", raising=False)
    assert rate._load() == (None, "pure Python (the C extension is not built)")


def test_the_rate_is_the_class_over_the_twin_or_the_pure_one():
    if rate._TWIN is None:
        assert rate.Rate is rate.PureRate and rate.RATE_PATH.startswith("pure Python")
    else:
        assert rate.Rate.__mro__[1] is rate._TWIN.Rate and rate.RATE_PATH == "C extension"
        assert rate.Rate.__module__ == rate.__name__ and rate.Rate.__qualname__ == "Rate"  # pickled by this name
    assert rate.PURE_ENV == "KAFKA_QUOTA_PROXY_PURE_PYTHON"  # the codec's switch (proxy.codec.accel), the same name
