"""Atomic writes: a crash never leaves a half-written file or folder behind (docs/design.md).

Files are written beside their target under a dot-name and renamed over it. Folders are staged beside theirs
(`.NAME.tmp`), the old one moved aside (`.NAME.old`), the new one renamed in, the old one deleted;
`recover_dir` undoes a kill that fell between those two renames.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path


class NotWritable(ValueError):
    """An output path that cannot be written, or whose write would replace something that is not a regular file."""


def check_target(path: Path) -> None:
    """A NotWritable unless `path` is missing or a regular file: a rename over a device, a folder or a link to one
    would replace it (`--json /dev/null` would leave a regular file in /dev)."""
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise NotWritable(f"{path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a link" if stat.S_ISLNK(mode) else "not a regular file"
        raise NotWritable(f"{path} is {kind}; an output file must be a regular file or not exist yet")


def check_writable(path: Path, folder: bool = False) -> None:
    """A NotWritable unless the file (or, with `folder`, the folder) `path` can be created and written, found by
    creating and deleting a probe file in it or in its nearest existing parent; nothing else is created."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise NotWritable(f"{path} is a file; expected a folder")
    else:
        check_target(path)
    nearest = path if folder and path.is_dir() else path.parent
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise NotWritable(f"{path}: {nearest} is a file")
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".chess-sim-probe-", dir=nearest)
    except OSError as error:
        raise NotWritable(f"{path} cannot be written: {nearest}: {error.strerror}") from None
    os.close(descriptor)
    os.unlink(probe)


def write_file(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` then rename `tmp` over `path` (its folder is created); a NotWritable if `path` is there and is not
    a regular file."""
    path = Path(path)
    check_target(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError as error:
        # a full or read-only disk: the old file stays whole and the message names the file, not the dot-name
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        raise NotWritable(f"{path} cannot be written: {error.strerror or error}") from None


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
