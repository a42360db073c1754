"""Append-only JSON-lines logs that survive a kill: each record is flushed and fsynced as it is written, a
line cut short by a kill is skipped on reading, and `keep` rewrites the file atomically (so that new lines
are never appended to the remains of a cut one)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from chess_sim import atomic


def append(path: Path, record: dict) -> None:
    with open(path, "a") as log:
        log.write(json.dumps(record) + "\n")
        log.flush()
        os.fsync(log.fileno())


def read(path: Path) -> list[dict]:
    """The complete records of `path` in order ([] if it does not exist)."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def keep(path: Path, wanted: Callable[[dict], bool]) -> list[dict]:
    """Rewrite `path` with only its complete records that `wanted` accepts; returns them ([] and nothing
    written if `path` does not exist)."""
    if not Path(path).is_file():
        return []
    records = [record for record in read(path) if wanted(record)]
    atomic.write_text(Path(path), "".join(json.dumps(record) + "\n" for record in records))
    return records
