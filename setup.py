"""The optional C extensions of the hot path: the codec's (proxy/codec/native/; proxy/codec/accel.py chooses it or the
pure Python), the connection's (proxy/connection/native/; proxy/connection/compiled.py chooses it or the pure Python)
and the quota core's (quota/primitives/native/: rate.c, the sampled rate, quota/primitives/rate.py choosing it or
``PureRate``; hot_paths.c, a byte-rate manager's per-request methods, quota/managers/hot_paths.py choosing it or
``PureHotPaths``). Everything else is in pyproject.toml. ``optional=True``: where no C compiler works the build goes on
without them, and the proxy runs the pure path."""

from pathlib import Path

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proxy.codec._accel",
            sources=sorted(str(p) for p in Path("proxy/codec/native").glob("*.c")),
            depends=["proxy/codec/native/accel.h"],
            optional=True,
            extra_compile_args=["-O2", "-fvisibility=hidden"],  # only PyInit__accel exported
        ),
        Extension(
            "proxy.connection._native",
            sources=sorted(str(p) for p in Path("proxy/connection/native").glob("*.c")),
            depends=["proxy/connection/native/connection.h"],
            optional=True,
            extra_compile_args=["-O2", "-fvisibility=hidden"],  # only PyInit__native exported
        ),
        Extension(
            "quota.primitives._rate",
            sources=sorted(str(p) for p in Path("quota/primitives/native").glob("*.c")),
            depends=["quota/primitives/native/rate.h"],
            optional=True,
            extra_compile_args=["-O2", "-fvisibility=hidden"],  # only PyInit__rate exported
        ),
    ]
)
