"""proxy.codec.accel: which path a process takes, and why it says so. The C extension when it is built and not
switched off; the pure Python otherwise (a machine without a compiler installs without it: its import fails)."""

from __future__ import annotations

import sys

import proxy.codec
from proxy.codec import accel, header, produce_prefix, skim


def test_the_extension_when_built_the_pure_path_when_switched_off_or_missing(monkeypatch):
    monkeypatch.delenv(accel.PURE_ENV, raising=False)
    native, path = accel._load()
    if native is not None:  # built here (the dev install compiles it where gcc is)
        assert path == "C extension"
    monkeypatch.setenv(accel.PURE_ENV, "1")
    assert accel._load() == (None, f"pure Python ({accel.PURE_ENV} is set)")
    monkeypatch.setenv(accel.PURE_ENV, "0")  # 0 or empty: not switched off
    assert accel._load()[0] is native
    monkeypatch.setitem(sys.modules, "proxy.codec._accel", None)  # as on a machine where it was never built
    monkeypatch.delattr(proxy.codec, "_accel", raising=False)
    assert accel._load() == (None, "pure Python (the C extension is not built)")


def test_each_module_bound_its_names_to_the_path_taken():
    bound = {
        produce_prefix.parse_request_prefix: produce_prefix.pure_parse_request_prefix,
        header.parse_response_prefix: header.pure_parse_response_prefix,
        header.response_header_length: header.pure_response_header_length,
        skim.tagged_fields: skim.pure_tagged_fields,
        skim.array_count: skim.pure_array_count,
    }
    for chosen, pure in bound.items():
        if accel.NATIVE is None:
            assert chosen is pure
        else:
            assert chosen is getattr(accel.NATIVE, pure.__name__.removeprefix("pure_"))
    assert accel.LABEL == ("python" if accel.NATIVE is None else "c")
