"""Constants every part shares, and the helpers of the config dataclasses: validation and `replace_fields`."""

from __future__ import annotations

import math
import re
from dataclasses import fields, is_dataclass, replace

TRAIN_SEED = 7_700_003
"""Training scenes: the demonstrations (`record`)."""
RL_TRAIN_SEED = 7_800_003
"""RL rollouts' scenes: not those of the demonstrations, on which a policy near its imitation start succeeds more
often than on new scenes (so training success would read high)."""
VALIDATION_SEED = 9_300_003
TEST_SEED = 5_500_001

CHUNK = 50
"""T: control steps per decision (an action chunk)."""
ACTION_DIM = 6
"""A: joint targets per control step."""
DENOISE_STEPS = 10
"""K: Euler steps of a flow policy's denoising chain."""

CAMERAS = ("front", "wrist")
"""The two cameras: observations `pixels/<name>`, dataset and policy features `observation.images.<name>`."""
JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
"""LeRobot SO-101 follower joint names; arm joints in degrees, gripper 0 (closed) to 100 (open)."""


POLICY_KINDS = ("compact", "smolvla")
"""Policies `chess-sim train` builds: the compact policy (new, or from `--init`), or SmolVLA from a LeRobot
checkpoint."""

ON_FAILURE = ("stop", "reset")
"""What `chess-sim play` does after a failed move: stop the game, or set the board up in the game's position after
that move and go on."""

BACKENDS = ("local", "ray")
"""Where simulators run (`sim.backends.make_vec_env`): worker processes on this machine, or Ray actors anywhere
in a cluster."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def at_least(config, minimum: float, *names: str) -> None:
    for name in names:
        require(getattr(config, name) >= minimum, f"{name} must be >= {minimum}, got {getattr(config, name)}")


_INTERVAL = re.compile(r"^([\[(])\s*(-?[\d.e+-]+|-inf)\s*,\s*(-?[\d.e+-]+|inf)\s*([\])])$")


def _interval(text: str) -> tuple[float, bool, float, bool]:
    """`"[0, 1)"` -> (0.0, True, 1.0, False): the bounds and whether each is included."""
    match = _INTERVAL.match(text)
    assert match, f"not an interval: {text!r}"
    return float(match[2]), match[1] == "[", float(match[3]), match[4] == "]"


def describe_range(text: str) -> str:
    """An interval as the help and the errors say it: `>= 1`, `> 0`, `in [0, 1)`."""
    low, low_in, high, high_in = _interval(text)
    shown = f"{low:g}"
    if high == math.inf:
        return f">= {shown}" if low_in else f"> {shown}"
    return f"in {text}"


def check_ranges(config) -> None:
    """ValueError (one line) for a numeric field outside its interval in the class's `RANGES` ({field: "[1, inf)"}):
    the single place each range is written, which `--help` shows too. None (a field's "none") passes."""
    for name, text in type(config).RANGES.items():
        value = getattr(config, name)
        if value is None:
            continue
        low, low_in, high, high_in = _interval(text)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        inside = number and (value >= low if low_in else value > low) and (value <= high if high_in else value < high)
        require(inside, f"{name} must be {describe_range(text)}, got {value!r}")


def replace_fields(config, **changes):
    """`config` with fields changed by name wherever they sit in its tree of nested configs (a name is unique within
    a tree: `replace_fields(rl, lr=0.0, steer=True)` changes `rl.ppo.lr` and `rl.start.steer`); ValueError for a name
    the tree does not have, or a value a config refuses."""
    remaining = dict(changes)

    def build(node):
        own = {}
        for item in fields(node):
            value = getattr(node, item.name)
            if is_dataclass(value):
                own[item.name] = build(value)
            elif item.name in remaining:
                own[item.name] = remaining.pop(item.name)
        return replace(node, **own)

    result = build(config)
    if remaining:
        raise ValueError(f"{type(config).__name__} has no field {', '.join(sorted(remaining))}")
    return result
