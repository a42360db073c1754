"""Open any saved FlowPolicy directory by what its `config.json` says it holds: ours (`"kind"`) or a LeRobot
SmolVLA checkpoint (`"type": "smolvla"`), with its learned start (`policy/start.py`) when it has one; evaluation
also opens any other LeRobot policy (`policy/lerobot_policy.py`)."""

from __future__ import annotations

import json
from pathlib import Path

from chess_sim.policy.base import FlowPolicy


def load_policy(directory) -> FlowPolicy:
    """The policy saved in `directory`, in eval mode; ValueError (one line) for a missing, corrupt or unknown
    policy directory."""
    from chess_sim.policy.start import has_start, load_start

    policy = _load_base(directory)
    return load_start(policy, directory).eval() if has_start(directory) else policy


def load_evaluated(directory, trust_remote_code: bool = False):
    """What `chess-sim eval` runs from `directory`: a FlowPolicy (ours, or a SmolVLA saved by chess-sim) as
    `load_policy` opens it, else any LeRobot policy (`LeRobotPolicy`, whose processors may run the checkpoint's
    own code only with `trust_remote_code`); ValueError (one line) otherwise."""
    from chess_sim.policy.lerobot_policy import LeRobotPolicy, is_lerobot_policy
    from chess_sim.policy.smolvla import SIDECAR

    directory = Path(directory)
    if is_lerobot_policy(directory) and not (directory / SIDECAR).is_file():
        return LeRobotPolicy.load(directory, trust_remote_code=trust_remote_code)
    return load_policy(directory)


def check_reads(policy, tasks: str) -> None:
    """ValueError (one line) when `policy` cannot read the instructions of the task profile `tasks`: a compact policy
    trained without captures has no token for the captured piece (SmolVLA and LeRobot's policies read any text)."""
    from chess_sim.policy.compact import CompactPolicy

    base = getattr(policy, "base", policy)  # a learned start wraps the policy
    if tasks == "captures" and isinstance(base, CompactPolicy) and not base.config.captures:
        raise ValueError("this compact policy reads no capture instructions (it was trained without --tasks captures)")


def _load_base(directory) -> FlowPolicy:
    from chess_sim.policy.compact import KIND as COMPACT, CompactPolicy

    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{directory} is not a policy directory (no config.json)")
    try:
        data = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{config_path} is not valid JSON ({error})") from None
    if isinstance(data, dict) and data.get("type") == "smolvla":  # LeRobot's name for SmolVLA checkpoints
        from chess_sim.policy.smolvla import SmolVLAFlowPolicy

        return SmolVLAFlowPolicy.load(directory)  # raises its own one-line ValueErrors
    if not isinstance(data, dict) or data.get("kind") != COMPACT:
        raise ValueError(f"{directory} does not hold a chess-sim policy (config.json names no known kind)")
    return CompactPolicy.load(directory)  # raises its own one-line ValueErrors
