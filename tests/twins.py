"""What the differential tests of the C twins compare: a call's answer or its error."""

from __future__ import annotations


def outcome(call, *args):
    """What ``call(*args)`` gives: ("value", its value), ("bytes", its type, its bytes) for bytes, a bytearray or a
    memoryview, or ("raised", the class, the message) of what it raised: the same from both twins or a difference."""
    try:
        result = call(*args)
    except Exception as exc:  # every error counts: the same class and message from both
        return "raised", type(exc), str(exc)
    if isinstance(result, (bytes, bytearray, memoryview)):
        return "bytes", type(result), bytes(result)
    return "value", result


def asked_outcomes(module, pure, rest_name: str, twin_type, rest, arguments):
    """An asked stage's pure function ``pure`` and its twin (``twin_type(rest, pure)``), each called on fresh
    ``arguments(twin)`` (False for the pure call, True for the twin's): the pure function with ``module``'s
    ``rest_name`` (the part it hands its uncommon cases to) replaced by ``rest``, as the twin is made over it. Both
    outcomes, the pure one's first; ``rest.twin`` says which side is calling it."""
    import pytest

    twin = twin_type(rest, pure)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, rest_name, rest)
        rest.twin = False
        got_pure = outcome(pure, *arguments(False))
        rest.twin = True
        got_twin = outcome(twin, *arguments(True))
    return got_pure, got_twin
