"""Every log line bounded in length; every repeated message template rate-limited with a count of what was
suppressed (proxy.ground.logs.BoundedLines, on the handlers the CLI configures)."""

from __future__ import annotations

import logging

from proxy.ground.logs import BoundedLines


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def record(msg: str, *args, name: str = "proxy.x") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)


def test_a_long_message_is_cut_saying_how_much():
    lines = BoundedLines(max_chars=100)
    r = record("bad value %s", "v" * 5000)
    assert lines.filter(r)
    assert len(r.getMessage()) < 160 and "4910 more characters" in r.getMessage()


def test_a_flood_of_one_template_is_limited_and_the_next_line_counts_the_rest():
    clock = Clock()
    lines = BoundedLines(burst=3, interval_s=10, now=clock)
    logged = [lines.filter(record("cannot reach %s", f"peer-{i}")) for i in range(1000)]
    assert logged.count(True) == 3
    assert lines.filter(record("another template")) is True  # other messages are not held back by the flood
    clock.t = 10.0
    r = record("cannot reach %s", "peer-x")
    assert lines.filter(r)
    assert "997 more lines like this" in r.getMessage()


def test_templates_are_remembered_in_bounded_memory():
    lines = BoundedLines(max_templates=100)
    for i in range(10_000):
        lines.filter(record(f"template {i}"))
    assert len(lines._templates) == 100


def test_a_traceback_is_bounded_too():
    lines = BoundedLines(max_chars=200)
    try:
        raise ValueError("x" * 10_000)
    except ValueError:
        import sys

        r = logging.LogRecord("proxy.x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    assert lines.filter(r)
    assert len(r.exc_text) <= 200


def test_the_cli_puts_the_filter_on_every_root_handler():
    from proxy.ground.logs import install_bounded_lines

    root = logging.Logger("root-for-test")
    handlers = [logging.StreamHandler(), logging.StreamHandler()]
    for h in handlers:
        root.addHandler(h)
    install_bounded_lines(root)
    install_bounded_lines(root)  # idempotent
    assert all(sum(isinstance(f, BoundedLines) for f in h.filters) == 1 for h in handlers)
