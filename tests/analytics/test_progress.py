"""What ``analyze`` says while a long step runs: the Spark stage running and its tasks done, read from a real job
held in flight on the tests' session (the steps' own lines are checked through the CLI in test_job.py)."""

import io
import os
import threading
import time

import pytest

pytest.importorskip("pyspark", reason="the analytics extra (pip install kafka-quota-proxy[analytics]) is not installed")

from analytics.progress import Progress  # noqa: E402
from tests.harness import wait_until  # noqa: E402


def held_until(path: str):
    """A task that runs until ``path`` exists (at most 60 s): a step that runs long, for as long as the test wants."""

    def task(_):
        deadline = time.monotonic() + 60
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        return 1

    return task


def test_a_long_step_says_the_stage_running_and_its_tasks(spark, tmp_path):
    out = io.StringIO()
    progress = Progress(spark, 2, out, every_s=0.2)
    release = str(tmp_path / "release")
    job = threading.Thread(
        target=lambda: spark.sparkContext.parallelize([0, 1], 2).map(held_until(release)).collect(), daemon=True
    )
    try:
        progress.start()
        progress.step("replay of the logged demand")
        assert out.getvalue().startswith("analyze [1/2] replay of the logged demand (")
        job.start()
        wait_until(lambda: "of 2 tasks done" in out.getvalue(), 60, "a line with the running stage")
    finally:
        open(release, "w").close()
        job.join(60)
        progress.stop()
    line = next(line for line in out.getvalue().splitlines() if "of 2 tasks done" in line)
    assert line.startswith("analyze     step 1/2 at ") and ": stage " in line, line
    assert not job.is_alive() and progress.spark_done() == (1, 2)  # the job and its two tasks, nothing before it
    assert "analyze-progress" not in [t.name for t in threading.enumerate()]  # stopped: no line comes after
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_sparks_console_progress_bar_only_on_a_terminal():
    """Spark draws its bar on standard error: on where that is a terminal, off in a log file (carriage returns); the
    master is local[*] unless given or set by spark-submit."""
    from analytics.job import session_settings

    master, settings = session_settings(None, True, submitted=False)
    assert master == "local[*]" and settings["spark.ui.showConsoleProgress"] == "true"
    assert "spark.sql.shuffle.partitions" in settings
    master, settings = session_settings(None, False, submitted=True)
    assert master is None and settings == {"spark.ui.showConsoleProgress": "false"}
    assert session_settings("spark://h:7077", False, submitted=False)[0] == "spark://h:7077"
