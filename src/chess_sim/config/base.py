"""Constants every part shares, and the helpers of the config dataclasses: validation and `replace_fields`."""

from __future__ import annotations

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
