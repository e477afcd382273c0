"""What the settings table says of one setting: its default, type, bounds and text."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Setting:
    default: int | float | None  # None: derived from other settings where it is used
    kind: type
    minimum: float
    maximum: float
    doc: str
