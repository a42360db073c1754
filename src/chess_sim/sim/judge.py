"""The judge: the outcome of an episode from simulator state.

Pure functions over `Snapshot`s (plain arrays, no MuJoCo), so every rule can be tested on hand-made states.
`env.py` builds one snapshot per control step and feeds it to `Judge.update`.

Ends, one per episode:
- `success`: target upright on its goal square (within `place_tolerance_mm`), resting on the board, released,
  the jaws at least `gripper_clear_mm` away, and no other piece moved more than `disturb_mm` or tipped.
  Success ends the episode at once.
- `unstable`: non-finite state or a body faster than `unstable_speed`; ends at once.
- `toppled` (any piece tilted past `upright_deg` for `topple_seconds`) and `disturbed` (another piece moved more than
  `disturb_mm`) can never be undone: they end the episode at once with `early_stop`, and otherwise are
  reported at the time limit.
- `dropped`: the target fell from the jaws (it rests above the board, or off it, or away from the goal after
  having been lifted). The robot may pick it up again, so it ends an episode only with `early_stop` and
  only when the target left the board.
- `timeout`: none of the above by the time limit (a truncation, not a terminal state).
A piece's yaw never counts: a knight facing sideways on its square is still on its square.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from chess_sim.config import BoardConfig, JudgeConfig

ENDS = ("success", "toppled", "disturbed", "dropped", "timeout", "unstable")
RESTING_SPEED = 0.02
"""m/s: a target slower than this is at rest (a settled piece moves < 1 mm/s)."""
ON_BOARD_MM = 2.0
"""A piece's base within this of the board surface stands on the board."""


@dataclass(frozen=True)
class Snapshot:
    """Simulator state at one control step. N = number of piece slots."""

    positions: np.ndarray
    """(N, 3) base-centre positions of every piece."""
    up: np.ndarray
    """(N, 3) unit axes of the pieces (their local +z)."""
    start: np.ndarray
    """(N, 3) base-centre positions at the start of the episode."""
    target: int
    goal_xy: np.ndarray
    """(2,) centre of the goal square."""
    board_top: float
    target_speed: float
    max_speed: float
    """Largest linear speed of any body (m/s)."""
    jaws_on_target: int
    """How many jaw pads touch the target (0, 1 or 2)."""
    gripper_touches_target: bool
    gripper_clearance_mm: float
    """Smallest distance between a gripper geom and the target (capped, e.g. at 50 mm)."""
    jaw_centre: np.ndarray
    """(3,) midpoint of the two jaw pads."""


@dataclass
class Judge:
    """Running measurements of one episode; `update` once per control step."""

    cfg: JudgeConfig
    board: BoardConfig
    early_stop: bool = False
    control_hz: int = 30
    max_tilt_deg: float = 0.0
    max_rise_mm: float = 0.0
    clean_lift: bool = False
    close_lateral_mm: float = math.nan
    place_error_mm: float = math.nan
    tilted_steps: np.ndarray | None = None
    """(N,) consecutive steps each piece has been tilted past `upright_deg`."""
    failure: str | None = None
    """First irreversible failure seen (`toppled` or `disturbed`)."""
    dropped: bool = False
    ended: str | None = None

    def update(self, snap: Snapshot) -> str | None:
        """Fold in one snapshot; returns the end reason when the episode ends at this step, else None."""
        if self.ended is not None:
            return self.ended
        if not _finite(snap) or snap.max_speed > self.cfg.unstable_speed:
            return self._end("unstable")
        tilts = tilt_deg(snap.up)
        moved_mm = 1000.0 * np.sqrt(np.square(snap.positions - snap.start).sum(axis=1))
        moved_mm[snap.target] = 0.0
        target = snap.positions[snap.target]
        rise_mm = 1000.0 * (target[2] - snap.board_top)
        self.max_tilt_deg = max(self.max_tilt_deg, float(tilts[snap.target]))
        self.max_rise_mm = max(self.max_rise_mm, rise_mm)
        offset = target[:2] - snap.goal_xy
        self.place_error_mm = 1000.0 * float(np.sqrt(offset @ offset))
        others_still = moved_mm.max() <= self.cfg.disturb_mm
        if rise_mm >= self.cfg.lift_mm and others_still:
            self.clean_lift = True
        if math.isnan(self.close_lateral_mm) and snap.jaws_on_target == 2:
            self.close_lateral_mm = 1000.0 * float(np.hypot(*(snap.jaw_centre[:2] - target[:2])))

        tilted = tilts > self.cfg.upright_deg
        if self.tilted_steps is None:
            self.tilted_steps = np.zeros(len(tilts), dtype=int)
        self.tilted_steps = np.where(tilted, self.tilted_steps + 1, 0)
        toppled = self.tilted_steps >= max(1, round(self.cfg.topple_seconds * self.control_hz))
        if self.failure is None:
            if np.any(toppled):
                self.failure = "toppled"
            elif not others_still:
                self.failure = "disturbed"
        off_board = not _on_board(target, self.board)
        held = snap.gripper_touches_target
        fell = not held and snap.target_speed > RESTING_SPEED and rise_mm > self.cfg.dropped_mm
        lost_after_lift = (not held and self.max_rise_mm >= self.cfg.lift_mm and snap.target_speed < RESTING_SPEED
                           and self.place_error_mm > self.cfg.place_tolerance_mm)
        if fell or off_board or lost_after_lift:
            self.dropped = True

        if self.failure is None and self._placed(snap, tilted, rise_mm):
            return self._end("success")
        if self.early_stop and self.failure is not None:
            return self._end(self.failure)
        if self.early_stop and off_board and not held and snap.target_speed < RESTING_SPEED:
            return self._end("dropped")
        return None

    def _placed(self, snap: Snapshot, tilted: np.ndarray, rise_mm: float) -> bool:
        return (self.place_error_mm <= self.cfg.place_tolerance_mm
                and not tilted[snap.target]
                and abs(rise_mm) <= ON_BOARD_MM
                and snap.target_speed < RESTING_SPEED
                and not snap.gripper_touches_target
                and snap.gripper_clearance_mm >= self.cfg.gripper_clear_mm)

    def _end(self, reason: str) -> str:
        self.ended = reason
        return reason

    def timeout_end(self) -> str:
        """End reason when the time limit is reached without an earlier end."""
        if self.ended is not None:
            return self.ended
        reason = self.failure or ("dropped" if self.dropped else "timeout")
        return self._end(reason)

    def measurements(self) -> dict[str, float | bool | None]:
        """The episode's measurements so far; None where not measured yet (the gripper never closed on the
        target), so equal episodes give equal dicts and the values serialise to JSON."""
        return {
            "clean_lift": self.clean_lift,
            "close_lateral_mm": None if math.isnan(self.close_lateral_mm) else self.close_lateral_mm,
            "place_error_mm": None if math.isnan(self.place_error_mm) else self.place_error_mm,
            "max_tilt_deg": self.max_tilt_deg,
        }


def tilt_deg(up: np.ndarray) -> np.ndarray:
    """(N,) angle between each piece axis and the world vertical, degrees."""
    return np.degrees(np.arccos(np.clip(up[:, 2] / np.linalg.norm(up, axis=1), -1.0, 1.0)))


def _on_board(position: np.ndarray, board: BoardConfig) -> bool:
    half = 4 * board.square
    return (board.near_edge <= position[0] <= board.near_edge + 2 * half) and abs(position[1]) <= half


def _finite(snap: Snapshot) -> bool:
    return bool(np.all(np.isfinite(snap.positions)) and np.all(np.isfinite(snap.up))
                and math.isfinite(snap.max_speed))
