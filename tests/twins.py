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
