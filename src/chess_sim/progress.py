"""A one-line progress display (items/s and ETA) on a terminal; silent when stdout is not a TTY."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str, unit: str = "episodes", stream=None):
        self.total = total
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stdout
        self.enabled = self.stream.isatty()
        self.start = time.perf_counter()
        self.done = 0

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        self.stream.write(f"\r{self.label}: {self.done}/{self.total} {self.unit}  {rate:.2f}/s  "
                          f"ETA {eta:5.0f}s  {note}\033[K")
        self.stream.flush()

    def line(self, text: str) -> None:
        """A line of its own above the bar (printed plainly when there is no terminal)."""
        self.stream.write(("\r\033[K" if self.enabled else "") + text + "\n")
        self.stream.flush()

    def close(self) -> float:
        if self.enabled:
            self.stream.write("\n")
        return time.perf_counter() - self.start
