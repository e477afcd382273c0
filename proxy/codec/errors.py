"""The one error type the codec raises.

Every protocol violation found while reading bytes (bad length, truncated frame, unknown API version,
malformed field, correlation mismatch) is a :class:`ProtocolError`. Callers close the one connection
it came from and log the message; nothing else is ever raised from decoding.
"""


class ProtocolError(Exception):
    """Bytes from a peer that do not form a valid Kafka frame or message."""
