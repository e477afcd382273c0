"""tests/failure_reports.py in a run of its own: a test failing with a traceback entry Python gives no line number is
reported as failed, not turned into pytest's internal error (which ends the whole run and reports nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LINELESS = """
import types


def test_fails_with_a_lineless_traceback_entry():
    try:
        raise AssertionError("the failure to report")
    except AssertionError as error:
        tb = error.__traceback__
        # an instruction of this function the compiler gave no line (the handler's cleanup): tb_lineno is None, as
        # for an exception raised in such code
        lineless = next(start for start, _end, line in tb.tb_frame.f_code.co_lines() if line is None)
        raise error.with_traceback(types.TracebackType(tb, tb.tb_frame, lineless, -1))


def test_passes():
    pass
"""


def test_a_failure_with_a_lineless_traceback_entry_is_reported_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_lineless.py").write_text(LINELESS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.failure_reports", "-p", "no:cacheprovider", "-n", "1", "-rA"]
        + ["test_lineless.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=110,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # tests failed (3: an internal error)
    assert "INTERNALERROR" not in out, out
    assert "FAILED test_lineless.py::test_fails_with_a_lineless_traceback_entry" in out, out
    assert "AssertionError: the failure to report" in out and "PASSED test_lineless.py::test_passes" in out, out
