"""quota.primitives.compiled: for each C extension of the package, which path a process takes and why it says so.
The extension when it is built and not switched off; the pure Python otherwise (a machine without a compiler
installs without it: its import fails)."""

from __future__ import annotations

import importlib
import sys

import pytest

from quota.primitives.compiled import PURE_ENV, load_compiled


@pytest.mark.parametrize("name", ["proxy.codec._accel", "quota.primitives._rate"])
def test_the_extension_when_built_the_pure_path_when_switched_off_or_missing(monkeypatch, name):
    monkeypatch.delenv(PURE_ENV, raising=False)
    module, path = load_compiled(name)
    if module is not None:  # built here (the dev install compiles it where gcc is)
        assert path == "C extension" and module.__name__ == name
    monkeypatch.setenv(PURE_ENV, "1")
    assert load_compiled(name) == (None, "pure Python (KAFKA_QUOTA_PROXY_PURE_PYTHON is set)")
    monkeypatch.setenv(PURE_ENV, "0")  # 0 or empty: not switched off
    assert load_compiled(name)[0] is module
    package, _, leaf = name.rpartition(".")
    monkeypatch.setitem(sys.modules, name, None)  # as on a machine where it was never built
    monkeypatch.delattr(importlib.import_module(package), leaf, raising=False)
    assert load_compiled(name) == (None, "pure Python (the C extension is not built)")
