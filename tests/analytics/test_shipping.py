"""The code zip the replay gives Spark's executors (analytics.shipping): a Python with nothing but the standard
library runs a replay task from it, and its directory is removed whichever way the job ends. No Spark here: the
application is a recorder of what the job adds to it; tests/test_installed.py runs the replay from an installed
wheel on local[*] and on a standalone Spark cluster whose Python has none of the project."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from analytics import replay, shipping

ROWS = [
    {
        "user": "steady",
        "client_id": "over-quota",
        "api": "Produce",
        "quota_rate": 1_000_000.0,
        "series": [
            {
                "time": 1000.0 + 10 * k,
                "interval_s": 10.0,
                "bytes": 30_000_000,
                "requests": 60,
                "held_requests": 20 if k % 2 else 0,
                "held_ms": 6000 if k % 2 else 0,
            }
            for k in range(12)
        ],
    }
]
CANDIDATE = [{"entity": {"user": "steady"}, "producer_byte_rate": 2_000_000}]


class Application:
    """What code_shipped uses of a SparkSession: its application id and ``addPyFile``, recorded with whether the
    file was there when added."""

    def __init__(self, app_id: str = "app-1") -> None:
        self.added: list[str] = []
        self.sparkContext = SimpleNamespace(applicationId=app_id, addPyFile=self.add)

    def add(self, path: str) -> None:
        assert os.path.isfile(path)
        self.added.append(path)


def test_a_python_with_only_the_standard_library_runs_a_replay_task_from_the_zip(tmp_path):
    """As an executor without the project installed: ``-S -I`` (no site-packages, no PYTHONPATH, no cwd), the zip
    first on sys.path; the task's results are the driver's."""
    zipped = tmp_path / "code.zip"
    names = shipping.write_zip(str(zipped))
    assert {
        "quota/__init__.py",
        "analytics/__init__.py",
        "analytics/replay.py",
        "analytics/demand.py",
        "quota/primitives/rate.py",
    } <= set(names)
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(zipped)!r})
        before = set(sys.modules)
        from analytics import replay
        loaded = sorted({{m.split(".")[0] for m in set(sys.modules) - before}} - set(sys.stdlib_module_names))
        out = list(replay.replay_tenants({ROWS!r}, {CANDIDATE!r}, 11, 1, 1.0))
        print(json.dumps({{"loaded": loaded, "out": out, "from": replay.__file__}}))
    """)
    run = subprocess.run(
        [sys.executable, "-S", "-I", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["from"].startswith(str(zipped))
    assert set(got["loaded"]) <= set(shipping.PACKAGES), "the replay's tasks import what the zip does not hold"
    expected = list(replay.replay_tenants(ROWS, CANDIDATE, 11, 1, 1.0))
    assert [tuple(r) for r in got["out"]] == expected and expected[0][8] > 0  # held today


def test_the_zip_is_read_from_where_the_packages_are_installed(tmp_path):
    import quota

    names = shipping.write_zip(str(tmp_path / "code.zip"), ("quota",))
    installed = {
        os.path.relpath(os.path.join(folder, f), os.path.dirname(quota.__path__[0])).replace(os.sep, "/")
        for folder, _, files in os.walk(quota.__path__[0])
        for f in files
        if f.endswith(".py")
    }
    assert set(names) == installed and not any("__pycache__" in n for n in names)


def test_the_zip_is_removed_when_the_job_ends_even_when_it_fails():
    app = Application()
    with pytest.raises(RuntimeError):
        with shipping.code_shipped(app, session_ends_with_job=True):
            (added,) = app.added
            assert os.path.basename(os.path.dirname(added)).startswith(shipping.PREFIX)
            raise RuntimeError("the job failed")
    assert not os.path.exists(os.path.dirname(added))
    with shipping.code_shipped(app, session_ends_with_job=True):  # the next job of a new session: a new zip
        assert len(app.added) == 2 and os.path.isfile(app.added[1])
    assert not os.path.exists(os.path.dirname(app.added[1]))


def test_a_session_the_job_did_not_start_keeps_one_zip_until_the_interpreter_ends():
    """Its executors may come and go after the job and fetch every file the application was given."""
    app = Application("app-kept")
    for _ in range(2):
        with shipping.code_shipped(app, session_ends_with_job=False):
            pass
    (added,) = app.added
    assert os.path.isfile(added)
    shipping.remove_all()  # what the interpreter's exit runs
    assert not os.path.exists(os.path.dirname(added))


def test_sigterm_during_the_job_removes_the_zip_and_ends_the_process_as_sigterm_does(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from types import SimpleNamespace
        from analytics import cli, shipping
        app = SimpleNamespace(sparkContext=SimpleNamespace(applicationId="a", addPyFile=print))
        with cli.sigterm_cleans_up(), shipping.code_shipped(app, session_ends_with_job=True):
            sys.stdout.flush()
            time.sleep(120)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    try:
        added = proc.stdout.readline().strip()
        assert os.path.isfile(added)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert not os.path.exists(added) and os.listdir(tmp_path) == []
