import ast
import pathlib

import pytest

from quota import FORWARD, Forward, Throttle, combined, is_applied, shadowed

QUOTA_DIR = pathlib.Path(__file__).resolve().parents[3] / "quota"


def test_decisions_are_small_frozen_values():
    assert not is_applied(FORWARD) and FORWARD == Forward()
    throttle = Throttle(throttle_time_ms=100, mute_ms=100)
    assert is_applied(throttle)
    assert not is_applied(shadowed(throttle)) and shadowed(throttle).throttle_time_ms == 100
    # several stages: an applied throttle combines (the longest report and mute win), the rest leave it as it was
    assert combined(None, FORWARD) is None and combined(None, shadowed(throttle)) is None
    assert combined(None, throttle) is throttle
    assert combined(Throttle(50, 300), throttle) == Throttle(100, 300)
    assert combined(throttle, shadowed(Throttle(900, 900))) is throttle
    with pytest.raises(AttributeError):
        throttle.mute_ms = 0  # type: ignore[misc]
    with pytest.raises(ValueError):
        Throttle(throttle_time_ms=-1, mute_ms=0)


FORBIDDEN_MODULES = {"asyncio", "socket", "selectors", "prometheus_client", "proxy", "config", "time", "threading"}


@pytest.mark.parametrize("path", sorted(QUOTA_DIR.rglob("*.py")), ids=lambda p: p.name)
def test_quota_is_pure(path):
    source = path.read_text()
    for needle in ("time.time(", "time.monotonic(", "time.sleep("):
        assert needle not in source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots = {(node.module or "").split(".")[0]}
        else:
            continue
        assert not roots & FORBIDDEN_MODULES, f"{path.name} imports {roots & FORBIDDEN_MODULES}"
