"""A failing test is always reported: its traceback is made printable before pytest formats it.

Python 3.11 gives a traceback entry no line number (``tb_lineno`` is None) when the instruction that raised has none
(some of the code the compiler adds: cleanups, re-raises). pytest 8.4 cannot format such an entry: building the
failing test's report raises ``TypeError`` inside pytest, which is an internal error that ends the whole run, under
pytest-xdist every worker's tests with it, and prints no failure at all (a CI run ended so after 64 of its 4,000
tests). Each such entry is given its frame's line (or its code's first line) before the report is made; the failure is
then reported as any other."""

from __future__ import annotations

import types

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    excinfo = call.excinfo
    if excinfo is not None:
        seen: set[int] = set()
        error: BaseException | None = excinfo.value
        while error is not None and id(error) not in seen:  # the exception and the ones it was raised from
            seen.add(id(error))
            if _lineless(error.__traceback__):
                error.__traceback__ = _with_lines(error.__traceback__)
            error = error.__cause__ or error.__context__
        if _lineless(excinfo.tb):  # the raised exception's own traceback, mended above
            call.excinfo = pytest.ExceptionInfo.from_exception(excinfo.value)
    return (yield)


def _lineless(tb: types.TracebackType | None) -> bool:
    while tb is not None:
        if tb.tb_lineno is None:
            return True
        tb = tb.tb_next
    return False


def _with_lines(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The same entries, each without a line number given its frame's current line or its code's first."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(entries):
        lineno = entry.tb_lineno
        if lineno is None:
            lineno = entry.tb_frame.f_lineno or entry.tb_frame.f_code.co_firstlineno
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, lineno)
    return rebuilt
