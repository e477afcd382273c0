"""What ``analyze`` tells its user while it runs, on standard error: a line as each step starts, with how long the
job has run and the Spark jobs and tasks done so far, and while one step runs long, a line every ``every_s`` seconds
with the stages running and their tasks done. Spark's own console progress bar is on only where standard error is a
terminal (:func:`analytics.job.session_settings`): in a log file its carriage returns make lines unreadable, and it
does not say which step of the planner a stage belongs to, which these lines do. Each step is also the
description of its Spark jobs (``setJobDescription``), so Spark's web UI shows the planner's steps.

Read through PySpark's public status API (``SparkContext.statusTracker()``), so the same on ``local[*]`` and on a
cluster. Jobs that ran on the session before the planner started (a session the caller keeps) are not counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from analytics.timeaxis import duration

EVERY_S = 30.0  # a step running longer than this says what Spark is doing, again every so often
STOP_WAIT_S = 5.0  # how long stopping waits for the reporting thread (a status call in flight) before leaving it


class Progress:
    """``start()``, then ``step("reading the usage log")`` as each step starts, ``stop()`` at the end (in a
    ``finally``); ``out`` None: nothing is printed (the job descriptions are still set)."""

    def __init__(
        self,
        spark: Any,
        steps: int,
        out: TextIO | None,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._context = spark.sparkContext
        self._tracker: Any = None
        self._before: set[int] = set()
        self._steps, self._out, self._every_s, self._clock = steps, out, every_s, clock
        self._done = 0
        self._started = self._step_started = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._said = threading.Lock()  # a step's own line before any line about it (its Spark counts take a while)

    def start(self) -> None:
        """From now on: the jobs already known are not counted, and a long step is reported."""
        self._tracker = self._context.statusTracker()
        self._before = set(self._tracker.getJobIdsForGroup())
        if self._out is not None:
            self._thread = threading.Thread(target=self._report, name="analyze-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """No more lines; also when never started."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)
        if self._tracker is not None:
            self._context.setJobDescription(None)  # a session the caller keeps: its next jobs are not ours

    def step(self, text: str) -> None:
        """Step ``text`` starts: said, and the description of the Spark jobs it runs. The reporting thread sees the
        new step only once its line is printed: asking Spark for the counts may take longer than ``every_s`` on a
        busy machine, and a line "step 2 at ..." before "[2/5] ..." would read backwards."""
        started = self._clock()
        label = f"[{self._done + 1}/{self._steps}] {text}"
        self._context.setJobDescription(f"analyze {label}")
        if self._out is None:  # said nowhere: Spark's status not asked (thousands of calls to its JVM a run)
            self._done, self._step_started = self._done + 1, started
            return
        jobs, tasks = self.spark_done()
        with self._said:
            self._print(f"{label} ({duration(started - self._started)} so far; Spark: {jobs} jobs, {tasks} tasks done)")
            self._done, self._step_started = self._done + 1, started

    def spark_done(self) -> tuple[int, int]:
        """Spark jobs succeeded and tasks completed since the planner started."""
        jobs, stages = 0, set()
        for job_id in set(self._tracker.getJobIdsForGroup()) - self._before:
            info = self._tracker.getJobInfo(job_id)
            if info is None:  # no longer retained
                continue
            jobs += info.status == "SUCCEEDED"
            stages.update(info.stageIds)
        tasks = 0
        for stage_id in stages:  # a stage two jobs share (a shuffle read again) counted once
            stage = self._tracker.getStageInfo(stage_id)
            tasks += stage.numCompletedTasks if stage is not None else 0
        return jobs, tasks

    def running(self) -> str:
        """The stages running now and their tasks: ``stage 12 (parquet at ...): 3 of 8 tasks done``."""
        parts = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            stage = self._tracker.getStageInfo(stage_id)
            if stage is not None:
                parts.append(stage_line(stage.stageId, stage.name, stage.numCompletedTasks, stage.numTasks))
        return "; ".join(parts) or "no stage running"

    def _report(self) -> None:
        while not self._stop.wait(self._every_s):
            with self._said:
                done, started = self._done, self._step_started
            if done == 0 or self._clock() - started < self._every_s:  # no step said yet, or this one is young
                continue
            running = self.running()  # Spark asked outside the lock: a step starting meanwhile is not held up
            with self._said:
                if self._done == done:  # still the step this is about
                    at = duration(self._clock() - started)
                    self._print(f"    step {done}/{self._steps} at {at}: {running}")

    def _print(self, line: str) -> None:
        if self._out is not None:
            print(f"analyze {line}", file=self._out, flush=True)


def stage_line(stage_id: int, name: str, completed: int, total: int) -> str:
    return f"stage {stage_id} ({name}): {completed} of {total} tasks done"
