"""Coverage-guided fuzzing of the codec with atheris (libFuzzer): ``make fuzz``.

Not a pytest module (its name does not match ``test_*.py``). Run it as::

    .venv/bin/python tests/fuzz/fuzz_codec.py -max_total_time=60 -artifact_prefix=.fuzz/crashes/ .fuzz/corpus

Each input goes through :func:`tests.fuzz.codec_driver.drive`: the request and response frame splitters, the
header parsers, and the decoder of one (API key, direction, version) of the codec's tables chosen by the input's
first two bytes. Only :class:`ProtocolError` (and :class:`Incomplete` from a header parser called directly) is
expected; any other exception or a broken invariant is a crash, and libFuzzer writes the input to
``.fuzz/crashes/crash-<sha1>``. Keep such an input as a test in ``tests/proxy/codec/test_fuzz_regressions.py``.

An empty corpus directory given on the command line is first filled with the seeds of :mod:`tests.fuzz.frames`
(real frames from kafka-python, and a filled frame of every API version).
"""

from __future__ import annotations

import os
import sys
import types

import atheris

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

with atheris.instrument_imports(include=["proxy", "tests.fuzz"]):
    from proxy.codec import compiler
    from tests.fuzz.codec_driver import TARGETS, drive
    from tests.fuzz.frames import seed_inputs


def _compile_all_codecs() -> None:
    """The codec compiles one reader and writer per API version on first use; compile them all now, so the
    instrumentation below covers the generated code too."""
    for api_key, direction, version in TARGETS:
        compiler.codec(api_key, direction, version)


def _instrument_generated_codecs() -> None:
    """Every generated reader and writer (one per struct) lives in its API version's namespace."""
    seen: set[int] = set()
    for reader, _writer, _cls in compiler._CACHE.values():
        for value in list(reader.__globals__.values()):
            if isinstance(value, types.FunctionType) and value.__code__.co_filename.startswith("<kafka codec"):
                if id(value) not in seen:
                    seen.add(id(value))
                    atheris.instrument_func(value)


def _fill_empty_corpus(argv: list[str]) -> None:
    for arg in argv[1:]:
        if not arg.startswith("-") and os.path.isdir(arg) and not os.listdir(arg):
            for i, seed in enumerate(seed_inputs()):
                with open(os.path.join(arg, f"seed-{i:04d}"), "wb") as f:
                    f.write(seed)


def main() -> None:
    _compile_all_codecs()
    _instrument_generated_codecs()
    _fill_empty_corpus(sys.argv)
    atheris.Setup(sys.argv, drive)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
