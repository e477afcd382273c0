"""The optional C extension of the codec's hot path (proxy/codec/_accel.c; proxy/codec/accel.py chooses it or the
pure Python). Everything else is in pyproject.toml. ``optional=True``: where no C compiler works the build goes on
without it, and the proxy runs the pure path."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "proxy.codec._accel",
            sources=["proxy/codec/_accel.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
