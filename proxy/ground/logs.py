"""Log lines that stay cheap whatever clients send: one line per peer and kind of error per interval.

A client that sends a thousand malformed frames a second must not write a thousand log lines: the first error of a
kind from a peer is logged, the next ones within ``interval_s`` are counted, and the next line logged for that peer
says how many were suppressed. Peers are kept in a bounded LRU, so memory does not grow with the addresses seen.
"""

from __future__ import annotations

from collections import OrderedDict


class LogLimiter:
    __slots__ = ("interval_s", "max_peers", "_peers")

    def __init__(self, interval_s: float = 10.0, max_peers: int = 10_000) -> None:
        self.interval_s = interval_s
        self.max_peers = max_peers
        self._peers: OrderedDict[tuple[str, str], list] = OrderedDict()  # (peer, kind) -> [logged at, suppressed]

    def allow(self, peer: str, kind: str, now: float) -> int | None:
        """None: do not log this one (it is counted). Otherwise log it, mentioning the returned number of lines
        suppressed since the last one."""
        key = (peer, kind)
        state = self._peers.get(key)
        if state is not None and now - state[0] < self.interval_s:
            state[1] += 1
            return None
        suppressed = 0 if state is None else state[1]
        self._peers[key] = [now, 0]
        self._peers.move_to_end(key)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        return suppressed


MAX_LINE = 2000  # characters of a log message; the rest is cut, saying how much


AUDIT_LOGGER = "kafka_quota_proxy.audit"


class BoundedLines:
    """A logging filter for the proxy's handlers: every message at most ``max_chars`` long, and every message
    template (a logger's format string, whatever its arguments) at most ``burst`` lines per ``interval_s``; the
    lines past that are counted and the next one logged says how many of that template were suppressed. The
    per-peer limiters above decide what one client can make the proxy log; this is the guarantee for everything
    else (aiokafka's reconnect errors, an exception repeated per request), so no input rate becomes a log rate.
    Templates are kept in a bounded LRU."""

    def __init__(
        self,
        max_chars: int = MAX_LINE,
        burst: int = 20,
        interval_s: float = 10.0,
        max_templates: int = 10_000,
        now=None,
    ) -> None:
        import time

        self.max_chars = max_chars
        self.burst = burst
        self.interval_s = interval_s
        self.max_templates = max_templates
        self._now = now or time.monotonic
        self._templates: OrderedDict[tuple[str, str], list] = OrderedDict()  # -> [window start, lines, suppressed]

    def filter(self, record) -> bool:
        key = (record.name, str(record.msg)[:200])
        now = self._now()
        state = self._templates.get(key)
        if state is None or now - state[0] >= self.interval_s:
            suppressed = 0 if state is None else state[2]
            state = [now, 0, 0]
            self._templates[key] = state
            self._templates.move_to_end(key)
            while len(self._templates) > self.max_templates:
                self._templates.popitem(last=False)
        else:
            suppressed = 0
        if state[1] >= self.burst and record.name != AUDIT_LOGGER:  # who changed the configuration: every line
            # (only admins make them: proxy.ops.audit)
            state[2] += 1
            return False
        state[1] += 1
        message = record.getMessage()
        if record.exc_info and not record.exc_text:  # the traceback is bounded too
            import logging

            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and len(record.exc_text) > self.max_chars:
            record.exc_text = record.exc_text[-self.max_chars :]
        if len(message) > self.max_chars:
            message = f"{message[: self.max_chars]}... ({len(message) - self.max_chars} more characters)"
        if suppressed:
            message = f"{message} ({suppressed} more lines like this in the previous {self.interval_s:g} s not logged)"
        record.msg, record.args = message, None
        return True


def install_bounded_lines(root=None) -> BoundedLines:
    """Put one :class:`BoundedLines` on every handler of the root logger (after logging is configured)."""
    import logging

    root = root or logging.getLogger()
    bounded_lines = BoundedLines()
    for handler in root.handlers:
        if not any(isinstance(f, BoundedLines) for f in handler.filters):
            handler.addFilter(bounded_lines)
    return bounded_lines
