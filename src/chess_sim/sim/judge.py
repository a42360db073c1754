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
- `dropped`: the target fell from the jaws (released while still falling above the board, off the board, or
  at rest away from the goal after having been lifted). The robot may pick it up again, so it ends an episode only with `early_stop` and
  only when the target left the board.
- `timeout`: none of the above by the time limit (a truncation, not a terminal state).
A piece's yaw never counts: a knight facing sideways on its square is still on its square.

A capture has two legs, each judged as above in turn: the captured piece to the capture area on the table
(anywhere in it, upright, released), then the mover to its square. The snapshot names the leg's piece and goal;
when a leg that is not the last is done, `leg_done` turns True and the env moves on (`next_leg`). Pieces of
finished legs no longer count as disturbed when moved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from chess_sim.config import BoardConfig, JudgeConfig

ENDS = ("success", "toppled", "disturbed", "dropped", "timeout", "unstable", "policy_error")
"""Every end an episode can have; `policy_error` (a NaN or inf action) is the env's, the others the judge's."""


@dataclass(slots=True)
class Snapshot:
    """Simulator state at one control step. N = number of piece slots. (Not frozen: a frozen dataclass
    costs microseconds per construction, and one is built every control step.)"""

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
    """Largest linear speed of any piece (m/s); inf when MuJoCo flagged a bad position, velocity or acceleration
    (and reset its data)."""
    jaws_on_target: int
    """How many jaw pads touch the target (0, 1 or 2)."""
    gripper_touches_target: bool
    gripper_clearance_mm: float
    """Smallest distance between a gripper geom and the target (capped, e.g. at 50 mm)."""
    jaw_centre: np.ndarray
    """(3,) midpoint of the two jaw pads."""
    goal_top: float | None = None
    """Height of the surface the leg sets its piece on (None: the board's top)."""
    goal_area: tuple[float, float, float, float] | None = None
    """A captured piece's goal: anywhere in this area of the table (x from, x to, y from, y to); None: within
    `JudgeConfig.place_tolerance_mm` of `goal_xy`."""
    finished: tuple[int, ...] = ()
    """Slots of the pieces of finished legs (not counted as disturbed)."""
    last_leg: bool = True
    """Whether this leg's placement ends the episode in success."""


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
    leg_done: bool = False
    """A leg that is not the last was just completed: the env moves to the next (`next_leg`)."""

    def next_leg(self) -> None:
        """Start judging the next leg of a capture: the per-leg measurements start again (the first lift and
        grasp stay the episode's)."""
        self.leg_done = False
        self.max_rise_mm = 0.0
        self.place_error_mm = math.nan
        self.dropped = False

    def update(self, snap: Snapshot) -> str | None:
        """Fold in one snapshot; returns the end reason when the episode ends at this step, else None.

        Runs every control step, so it works on squared distances and axis z-components (the pieces' axes
        are unit vectors) rather than angles and norms: a third of the env's cost over raw physics."""
        if self.ended is not None:
            return self.ended
        if not _finite(snap) or snap.max_speed > self.cfg.unstable_speed:
            return self._end("unstable")
        cfg = self.cfg
        tilted = snap.up[:, 2] < math.cos(math.radians(cfg.upright_deg))
        moved_sq = np.square(snap.positions - snap.start).sum(axis=1)
        moved_sq[snap.target] = 0.0
        if snap.finished:
            moved_sq[list(snap.finished)] = 0.0
        others_still = moved_sq.max() <= (cfg.disturb_mm / 1000.0) ** 2
        x, y, z = snap.positions[snap.target].tolist()
        rise_mm = 1000.0 * (z - snap.board_top)
        up_z = min(1.0, max(-1.0, float(snap.up[snap.target, 2])))
        self.max_tilt_deg = max(self.max_tilt_deg, math.degrees(math.acos(up_z)))
        self.max_rise_mm = max(self.max_rise_mm, rise_mm)
        self.place_error_mm = 1000.0 * math.hypot(x - snap.goal_xy[0], y - snap.goal_xy[1])
        if rise_mm >= cfg.lift_mm and others_still:
            self.clean_lift = True
        if math.isnan(self.close_lateral_mm) and snap.jaws_on_target == 2:
            self.close_lateral_mm = 1000.0 * math.hypot(snap.jaw_centre[0] - x, snap.jaw_centre[1] - y)

        if self.tilted_steps is None:
            self.tilted_steps = np.zeros(len(tilted), dtype=int)
        self.tilted_steps = (self.tilted_steps + 1) * tilted
        if self.failure is None:
            if self.tilted_steps.max() >= max(1, round(cfg.topple_seconds * self.control_hz)):
                self.failure = "toppled"
            elif not others_still:
                self.failure = "disturbed"
        at_goal = (self.place_error_mm <= cfg.place_tolerance_mm if snap.goal_area is None
                   else in_area(snap.positions[snap.target], snap.goal_area))
        held = snap.gripper_touches_target
        # released off the board, and not in the capture area (a captured piece carried over the table is no drop)
        off_board = not held and not _on_board(x, y, self.board) and not at_goal
        resting = snap.target_speed < cfg.resting_speed
        fell = not held and not resting and rise_mm > cfg.dropped_mm
        lost_after_lift = not held and resting and self.max_rise_mm >= cfg.lift_mm and not at_goal
        if fell or off_board or lost_after_lift:
            self.dropped = True

        goal_top = snap.board_top if snap.goal_top is None else snap.goal_top
        if self.failure is None and at_goal and self._placed(snap, bool(tilted.any()), 1000.0 * (z - goal_top)):
            if not snap.last_leg:
                self.leg_done = True
                return None
            return self._end("success")
        if self.early_stop and self.failure is not None:
            return self._end(self.failure)
        if self.early_stop and off_board and not held and resting:
            return self._end("dropped")
        return None

    def _placed(self, snap: Snapshot, any_tilted: bool, height_mm: float) -> bool:
        """Target (at its goal) standing on the goal's surface (`height_mm` above it) and released, and no piece
        leaning (one knocked during the release may still be falling: its topple is not yet counted)."""
        return (not any_tilted
                and abs(height_mm) <= self.cfg.on_board_mm
                and snap.target_speed < self.cfg.resting_speed
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


def in_area(position: np.ndarray, area: tuple[float, float, float, float]) -> bool:
    """Whether a piece's base centre stands within `area` (x from, x to, y from, y to) seen from above."""
    x0, x1, y0, y1 = area
    return bool(x0 <= position[0] <= x1 and y0 <= position[1] <= y1)


def _on_board(x: float, y: float, board: BoardConfig) -> bool:
    half = 4 * board.square
    return (board.near_edge <= x <= board.near_edge + 2 * half) and abs(y) <= half


def _finite(snap: Snapshot) -> bool:
    """No NaN or inf anywhere (either propagates into the sum)."""
    return math.isfinite(float(snap.positions.sum() + snap.up.sum()) + snap.max_speed)


def episode_row(info: dict) -> dict:
    """One flat row of a finished episode's task and outcome, from its last step's `info` (for tables, CSV, JSON)."""
    row = {key: info[key] for key in ("seed", "index", "piece", "color", "from", "to", "instruction")}
    if info.get("captured") is not None:  # only captures: the other profiles' rows keep their columns
        row.update(captured=info["captured"], legs_done=info["legs_done"])
    row["end"] = info["end"]
    row.update(info["measurements"])
    return row
