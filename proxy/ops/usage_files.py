"""The usage log's files: ``usage-<start>.jsonl`` in the configured directory, a new one past a size or an age, the
oldest deleted beyond ``max_files``. Written by the usage log's writer thread only."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import BinaryIO

from config.usage import UsageLogConfig

log = logging.getLogger(__name__)


class RotatingWriter:
    """Appends lines to ``usage-<start>.jsonl`` files under ``dir``, a new file past ``max_file_bytes`` or
    ``max_file_age_seconds``, keeping at most ``max_files``. Runs in the writer thread only."""

    def __init__(self, config: UsageLogConfig, wall: Callable[[], float] = time.time) -> None:
        self.config = config
        self._wall = wall
        self._file: BinaryIO | None = None
        self._opened_at = 0.0
        self._size = 0

    def write(self, lines: list[str]) -> None:
        data = "".join(lines).encode()
        now = self._wall()
        config = self.config
        file = self._file
        if file is None or self._size >= config.max_file_bytes or now - self._opened_at >= config.max_file_age_seconds:
            file = self._rotate(now)
        file.write(data)
        file.flush()
        self._size += len(data)

    def _rotate(self, now: float) -> BinaryIO:
        """A new file (the current one closed, the oldest beyond ``max_files`` deleted)."""
        self.close()
        os.makedirs(self.config.dir, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{now % 1:.3f}"[1:]
        path = os.path.join(self.config.dir, f"usage-{stamp}{self.config.file_tag}.jsonl")
        file = self._file = open(path, "ab")
        self._opened_at, self._size = now, file.tell()
        self._prune()
        return file

    def _prune(self) -> None:
        names = sorted(n for n in os.listdir(self.config.dir) if n.startswith("usage-") and n.endswith(".jsonl"))
        for name in names[: max(0, len(names) - self.config.max_files)]:
            try:
                os.unlink(os.path.join(self.config.dir, name))
            except OSError as exc:
                log.warning("usage log: cannot delete old file %s: %s", name, exc)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
