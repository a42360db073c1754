"""What every weight-changing run (`chess-sim train`, `chess-sim rl`) shares: a new or resumable output folder, its
arguments file, atomic checkpoints, the log trimmed back to the checkpoint on resume, and the curves and report
redrawn at each validation.

A checkpoint is a policy directory (`chess-sim eval --policy` loads it) plus one state file of tensors, numbers and
dicts (optimizer, RNG, progress), written together by `atomic.write_dir` and read back with `weights_only=True`: a
run directory received from elsewhere cannot run code when resumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from chess_sim import atomic, jsonl
from chess_sim.errors import first_line


class RunError(Exception):
    """A run folder that cannot be started or resumed as asked (one-line message for the CLI)."""


def open_run(out: Path, resume: bool, state_file: str, args_file: str) -> bool:
    """Check that `out` can hold a new run (missing or empty) or, with `resume`, holds one: True when it continues
    from `last/<state_file>` (after undoing a kill that fell between the renames of a checkpoint), False when the
    run starts from the beginning: a new folder, or with `resume` a run killed before its first checkpoint (its
    arguments file is there; nothing was lost, so it starts again)."""
    out = Path(out)
    if resume:
        atomic.recover_dir(out / "last")
        if (out / "last" / state_file).is_file():
            return True
        if (out / args_file).is_file():
            return False
        raise RunError(f"{out} has no run to resume (no last/{state_file})")
    if out.exists() and any(out.iterdir()):
        raise RunError(f"{out} exists and is not empty; choose a new --out or add --resume")
    return False


def write_args(path: Path, args: dict) -> None:
    atomic.write_text(path, json.dumps(args, indent=2) + "\n")


def check_same_args(path: Path, args: dict, compared: Callable[[dict], dict], may_change: str) -> None:
    """A resume must continue the same run: `compared(args)` equal to `compared` of the arguments saved at `path`
    (`compared` keeps what defines the run and blanks what may differ between sittings, described by `may_change`);
    the one-line refusal names the settings that differ."""
    try:
        saved = compared(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as error:
        raise RunError(f"{path} is missing or damaged ({error}); cannot resume") from None
    except (KeyError, TypeError, AttributeError):
        raise RunError(f"{path} was written by an older chess-sim; that run cannot be resumed by this one") from None
    given = compared(json.loads(json.dumps(args)))
    differing = sorted(_differences(saved, given))
    if differing:
        raise RunError(f"{Path(path).parent} holds a run with other settings ({', '.join(differing[:4])}"
                       f"{', ...' if len(differing) > 4 else ''}); resume it with the same arguments ({may_change} "
                       f"may change)")


def _differences(saved, given, prefix: str = "") -> list[str]:
    if isinstance(saved, dict) and isinstance(given, dict):
        return [name for key in saved.keys() | given.keys()
                for name in _differences(saved.get(key), given.get(key), f"{prefix}{key}.")]
    return [] if saved == given else [prefix.rstrip(".").split(".")[-1]]


def save_checkpoint(directory: Path, policy, state: dict | None = None, state_file: str | None = None) -> None:
    """The policy's files, and `state` (tensors, numbers, dicts) as `state_file`, swapped in atomically."""
    def write(staging: Path) -> None:
        policy.save(staging)
        if state is not None:
            torch.save(state, staging / state_file)

    atomic.write_dir(directory, write)


def load_state(path: Path) -> dict:
    """A checkpoint's state file, without unpickling arbitrary objects; `RunError` when it cannot be read."""
    try:
        return torch.load(path, weights_only=True)
    except Exception as error:  # noqa: BLE001 - an unreadable or untrusted checkpoint is a bad input, not a crash
        raise RunError(f"{path} cannot be read as a checkpoint ({first_line(error)})") from None


def trim_log(path: Path, key: str, last: int) -> None:
    """Keep the log lines up to the checkpoint being resumed (`key` <= `last`), so none appears twice."""
    jsonl.keep(path, lambda line: isinstance(line.get(key), int) and line[key] <= last)


def redraw(out: Path, figure: bytes) -> None:
    """The run's `curves.png` and `report.html`, redrawn so that a running job can be watched."""
    from chess_sim.report import page, plots

    plots.write_png(Path(out) / "curves.png", figure)
    page.refresh(out)
