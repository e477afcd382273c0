"""One worker as the parent sees it: its process (the current one of a worker restarted), its link, and what the
link last said."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass(eq=False)
class Slot:
    index: int
    process: asyncio.subprocess.Process | None = None
    writer: asyncio.StreamWriter | None = None
    reader_task: asyncio.Task | None = None
    ops_port: int | None = None
    not_ready: str = "starting"
    started_once: bool = False  # said hello at least once
    hello: bool = False
    last_heard: float = 0.0  # time.monotonic() of the last frame on its link
    silenced: bool = False  # killed for not answering (its exit is reported so)
