"""Reading the simulator: joint units, piece poses and contacts turned into judge snapshots.

Units at the boundary follow LeRobot's SO-101 follower: arm joints in degrees, gripper 0 (closed) to 100
(open); MuJoCo works in radians. These conversions are the only place the two meet.
"""

from __future__ import annotations

import mujoco
import numpy as np

from chess_sim.sim.judge import Snapshot, in_area
from chess_sim.sim.scene import Scene

NO_POINT = np.full(3, np.nan)
"""Stands for the jaw centre when the jaws are not both on the target (the judge reads it only then)."""
CLEARANCE_CAP = 0.05
"""Gripper-to-target distances are computed up to 50 mm; farther is reported as 50 mm."""


class Units:
    """Conversion between LeRobot units (deg, gripper 0-100) and joint radians for one model."""

    def __init__(self, scene: Scene):
        model = scene.model
        joint_ids = model.dof_jntid[scene.arm_dof]
        self.lower_rad = model.jnt_range[joint_ids, 0].copy()
        self.upper_rad = model.jnt_range[joint_ids, 1].copy()
        self.lower = self.to_units(self.lower_rad)
        self.upper = self.to_units(self.upper_rad)

    def to_units(self, q_rad: np.ndarray) -> np.ndarray:
        """(..., 6) radians -> (..., 6) degrees with the gripper as 0-100 open %."""
        out = np.degrees(np.asarray(q_rad, dtype=np.float64))
        span = self.upper_rad[5] - self.lower_rad[5]
        out[..., 5] = 100.0 * (np.asarray(q_rad)[..., 5] - self.lower_rad[5]) / span
        return out

    def to_rad(self, units: np.ndarray) -> np.ndarray:
        """(..., 6) degrees / gripper % -> (..., 6) radians."""
        out = np.radians(np.asarray(units, dtype=np.float64))
        span = self.upper_rad[5] - self.lower_rad[5]
        out[..., 5] = self.lower_rad[5] + np.asarray(units, dtype=np.float64)[..., 5] / 100.0 * span
        return out


class ContactReader:
    """Per-step contact queries between the gripper and the pieces (vectorised over MuJoCo's contact list)."""

    def __init__(self, scene: Scene):
        model = scene.model
        self.scene = scene
        self.geom_body = model.geom_bodyid.copy()
        self.piece_geoms = [np.array([g for g in range(model.ngeom)
                                      if model.geom_bodyid[g] == slot.body and model.geom_contype[g]])
                            for slot in scene.slots]
        self.is_gripper = np.zeros(model.ngeom, dtype=bool)
        self.is_gripper[list(scene.gripper_geoms)] = True
        self.pad_set = frozenset(scene.jaw_geoms)
        self.bodies = np.array([slot.body for slot in scene.slots])
        self.qvel = np.array([np.arange(slot.qvel, slot.qvel + 3) for slot in scene.slots])
        """(N, 3) qvel addresses of each piece's linear velocity (world frame for a free joint)."""
        self._fromto = np.zeros(6)

    def jaw_contacts(self, data: mujoco.MjData, slot: int) -> tuple[int, bool]:
        """(number of pads touching the slot's piece, whether any gripper geom touches it)."""
        if data.ncon == 0:
            return 0, False
        pairs = data.contact.geom[:data.ncon]
        pairs = pairs[self.is_gripper[pairs].any(axis=1)]  # most contacts are pieces resting on the board
        body = self.scene.slots[slot].body
        pads, touching = set(), False
        for first, second in pairs.tolist():  # a handful at most: plain Python beats numpy here
            other = second if self.geom_body[first] == body else first if self.geom_body[second] == body else -1
            if other >= 0 and self.is_gripper[other]:
                touching = True
                if other in self.pad_set:
                    pads.add(other)
        return len(pads), touching

    def clearance(self, data: mujoco.MjData, slot: int) -> float:
        """Smallest distance (m, capped) between any gripper geom and the slot's piece."""
        best = CLEARANCE_CAP
        for g1 in np.flatnonzero(self.is_gripper):
            for g2 in self.piece_geoms[slot]:
                best = min(best, mujoco.mj_geomDistance(self.scene.model, data, int(g1), int(g2), CLEARANCE_CAP,
                                                        self._fromto))
        return max(best, 0.0)


BLOWN_UP = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQACC)
"""MuJoCo's warnings for a simulation that blew up: it then resets the data to the model's initial state, which
looks finite and calm, so the warning counters (cleared at every reset) are what tells."""


def snapshot(scene: Scene, data: mujoco.MjData, contacts: ContactReader, start: np.ndarray, target: int,
             goal_xy: np.ndarray, clearance_within_mm: float, goal_area: tuple | None = None,
             goal_top: float | None = None, finished: tuple[int, ...] = (), last_leg: bool = True) -> Snapshot:
    """Judge snapshot of `data` for the leg that takes `target` to `goal_xy` (or anywhere in `goal_area`, on a
    surface at `goal_top`: the board by default); `finished` and `last_leg` as in `Snapshot`. The gripper clearance
    is computed only when the target is within `clearance_within_mm` of the goal, or in its area (it matters only
    there and costs a few distance queries)."""
    positions = data.xpos[contacts.bodies]
    up = data.xmat[contacts.bodies][:, 2::3]
    speeds = np.sqrt(np.square(data.qvel[contacts.qvel]).sum(axis=1))
    pads, touching = contacts.jaw_contacts(data, target)
    offset = positions[target, :2] - goal_xy
    near_goal = (1000.0 * np.sqrt(offset @ offset) <= clearance_within_mm if goal_area is None
                 else in_area(positions[target], goal_area))
    clearance = contacts.clearance(data, target) if (near_goal and not touching) else 0.0
    max_speed = float(speeds.max())
    if not np.isfinite(max_speed) or any(data.warning[warning].number > 0 for warning in BLOWN_UP):
        max_speed = float("inf")
    pad_a, pad_b = scene.jaw_geoms
    jaw_centre = 0.5 * (data.geom_xpos[pad_a] + data.geom_xpos[pad_b]) if pads == 2 else NO_POINT
    return Snapshot(
        positions=positions, up=up, start=start, target=target, goal_xy=goal_xy,
        board_top=scene.board_top, target_speed=float(speeds[target]), max_speed=max_speed,
        jaws_on_target=pads, gripper_touches_target=touching, gripper_clearance_mm=1000.0 * clearance,
        jaw_centre=jaw_centre, goal_area=goal_area, goal_top=goal_top, finished=finished, last_leg=last_leg,
    )
