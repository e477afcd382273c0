"""proxy.codec.accel: which path a process takes, and why it says so. The C extension when it is built and not
switched off; the pure Python otherwise (a machine without a compiler installs without it: its import fails)."""

from __future__ import annotations

from proxy.codec import accel, header, produce_prefix, skim
from quota.primitives.compiled import load_compiled


def test_the_codec_asks_the_package_rule_for_its_extension():
    assert accel._load() == load_compiled("proxy.codec._accel")  # tests/quota/primitives/test_compiled.py
    assert (accel.NATIVE is None) == accel.PATH.startswith("pure Python")


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
