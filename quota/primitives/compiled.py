"""Whether a compiled twin runs or the pure Python it mirrors: one rule for each C extension of the package (the
codec's ``proxy.codec._accel``, the sampled rate's ``quota.primitives._rate``).

An extension is built when the package is installed where a C compiler is present (optional: without one the
install succeeds and the pure Python runs). ``KAFKA_QUOTA_PROXY_PURE_PYTHON`` set (not empty, not 0) keeps the pure
Python even where it is built. Each choosing module asks once, at import, and says the answer in ``--version`` and
the start-up line.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_ENV = "KAFKA_QUOTA_PROXY_PURE_PYTHON"


def load_compiled(name: str) -> tuple[ModuleType | None, str]:
    """(the extension module ``name``, or None for the pure Python; a line saying which runs and why)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None, f"pure Python ({PURE_ENV} is set)"
    try:
        module = importlib.import_module(name)
    except ImportError:  # built only where a compiler was
        return None, "pure Python (the C extension is not built)"
    return module, "C extension"
