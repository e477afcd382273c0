"""The order of ``analyze``'s lines when asking Spark for its counts is slow (a busy machine, a remote cluster): a
step's own line comes before any periodic line about that step, and no periodic line speaks of a step not yet said.
Spark's status API is played by a tracker whose answers take longer than the reporting period, so the reporting
thread wakes several times while a step is being said (a real session is in test_progress.py)."""

import io
import threading
import time
from types import SimpleNamespace

from analytics.progress import Progress
from tests.harness import wait_until


class SlowTracker:
    """``statusTracker()``'s answers: no jobs, no stages, each job-id list taking ``delay_s``."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def getJobIdsForGroup(self):
        time.sleep(self.delay_s)
        return []

    def getActiveStageIds(self):
        return []


class SlowContext:
    def __init__(self) -> None:
        self.tracker = SlowTracker(0.0)
        self.descriptions: list[str | None] = []

    def statusTracker(self):
        return self.tracker

    def setJobDescription(self, text):
        self.descriptions.append(text)


def test_each_step_is_said_before_the_lines_about_it_however_slow_spark_answers():
    context = SlowContext()
    out = io.StringIO()
    progress = Progress(SimpleNamespace(sparkContext=context), 2, out, every_s=0.02)
    progress.start()
    try:
        time.sleep(0.1)  # reporting periods pass before the first step: nothing to say yet
        assert out.getvalue() == ""
        context.tracker.delay_s = 0.2  # ten reporting periods while each step's counts are asked
        for text in ("reading the usage log", "replay of the logged demand"):
            progress.step(text)
            seen = len(out.getvalue())
            wait_until(lambda seen=seen: len(out.getvalue()) > seen, 10, "a periodic line after the step's")
    finally:
        progress.stop()
    lines = out.getvalue().splitlines()
    said = 0
    for line in lines:
        if line.startswith("analyze ["):
            said += 1
            assert line.startswith(f"analyze [{said}/2] "), lines
        else:
            assert line.startswith(f"analyze     step {said}/2 at "), lines  # about the step said last
    assert said == 2
    assert context.descriptions == [
        "analyze [1/2] reading the usage log",
        "analyze [2/2] replay of the logged demand",
        None,
    ]
    assert "analyze-progress" not in [t.name for t in threading.enumerate()]
