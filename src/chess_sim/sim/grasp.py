"""Pure geometry and timing of the scripted expert's plans (`sim/expert.py`): room for the open jaws beside a
piece, the closing direction an approach tilt allows, the eased interpolation of straight segments and gripper moves,
and the memoryless profile of free moves.

Positions are world metres (x across the board away from the base, z up); joint vectors are radians, (6,) with the
gripper last.
"""

from __future__ import annotations

import numpy as np

MOVING_JAW_REACH = 0.017
"""Horizontal distance from a gripped piece's axis to the middle of the open moving jaw (the fixed jaw's
is ~8 mm): what neighbours on that side must clear."""
FIXED_JAW_REACH = 0.008
MOVE_DONE = 1e-4
"""rad: a free move this close to its target has arrived (also its smallest step)."""


def jaw_room(point: np.ndarray, closing: np.ndarray, neighbours: np.ndarray) -> float:
    """Smallest distance from either open jaw to a neighbouring piece's axis (m)."""
    if len(neighbours) == 0:
        return np.inf
    jaws = [point[:2] + MOVING_JAW_REACH * closing[:2], point[:2] - FIXED_JAW_REACH * closing[:2]]
    return float(min(np.linalg.norm(neighbours - jaw, axis=1).min() for jaw in jaws))


def closing_for(point: np.ndarray, hint: np.ndarray, tilt: float) -> np.ndarray:
    """Closing direction at `point`: the hint when approaching vertically; with a tilt it must be horizontal
    and perpendicular to the radial plane, so the tangential direction nearest the hint."""
    if tilt == 0.0:
        return hint / np.linalg.norm(hint)
    radial = np.array([point[0], point[1], 0.0]) / np.linalg.norm(point[:2])
    tangent = np.cross([0.0, 0.0, 1.0], radial)
    return tangent if np.dot(tangent, hint) >= 0 else -tangent


def smooth(q_from: np.ndarray, q_to: np.ndarray, steps: int, ease: tuple[bool, bool] = (True, True)
           ) -> list[np.ndarray]:
    """`steps` targets from q_from (excluded) to q_to (included) on a cosine (ease-in/out) profile."""
    s = np.arange(1, steps + 1) / steps
    if ease == (True, True):
        s = 0.5 - 0.5 * np.cos(np.pi * s)
    elif ease[0]:
        s = 1.0 - np.cos(0.5 * np.pi * s)
    elif ease[1]:
        s = np.sin(0.5 * np.pi * s)
    return [q_from + (q_to - q_from) * si for si in s]


def resumable_move(q_from: np.ndarray, q_to: np.ndarray, dt: float, speed: float, brake: float) -> list[np.ndarray]:
    """Targets from q_from (excluded) to q_to (included) whose every step depends only on the distance still to go
    (the largest arm-joint gap): `speed` rad/s, slowing at `brake` rad/s^2 to stop at q_to. Memoryless, so a plan
    made from any of its own targets is the rest of it: an expert taking over in the middle of a move goes on as the
    one that started it (a cosine profile would start again from rest)."""
    plan, q = [], np.asarray(q_from, dtype=float).copy()
    while True:
        gap = q_to - q
        distance = float(np.abs(gap[:5]).max())
        if distance < MOVE_DONE:
            break
        step = max(min(speed, np.sqrt(2.0 * brake * distance)) * dt, MOVE_DONE)
        q = q + gap * min(1.0, step / distance)
        plan.append(q.copy())
    plan.append(np.array(q_to, dtype=float))
    return plan
