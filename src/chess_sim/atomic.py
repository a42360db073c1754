"""Atomic writes: a crash never leaves a half-written file or folder behind (docs/design.md).

Files are written beside their target under a dot-name and renamed over it. Folders are staged beside theirs
(`.NAME.tmp`), the old one moved aside (`.NAME.old`), the new one renamed in, the old one deleted;
`recover_dir` undoes a kill that fell between those two renames.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path


def write_file(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` then rename `tmp` over `path` (its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    write_file(path, lambda tmp: tmp.write_text(text))


def write_dir(directory: Path, write: Callable[[Path], None]) -> None:
    """`write(staging)` into an empty staging folder, then swap it in for `directory`."""
    directory = Path(directory)
    staging, old = _staging(directory), _old(directory)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    write(staging)
    recover_dir(directory)
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.rename(old)
    staging.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def recover_dir(directory: Path) -> None:
    """Put back the previous version of `directory` if a kill fell between the renames of `write_dir`."""
    directory = Path(directory)
    if not directory.exists() and _old(directory).exists():
        _old(directory).rename(directory)


def _staging(directory: Path) -> Path:
    return directory.with_name(f".{directory.name}.tmp")


def _old(directory: Path) -> Path:
    return directory.with_name(f".{directory.name}.old")
