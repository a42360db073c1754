"""One-line error messages from the exceptions of the libraries we call at the boundary (docs/design.md)."""

from __future__ import annotations


def first_line(error: BaseException, limit: int = 200) -> str:
    """An exception's first line, cut to `limit` characters (LeRobot's unknown-type error lists every type), or its
    type's name when it has no message."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line if len(line) <= limit else line[:limit] + "..."
