"""Reading the simulator: joint units, piece poses and contacts turned into judge snapshots.

Units at the boundary follow LeRobot's SO-101 follower: arm joints in degrees, gripper 0 (closed) to 100
(open); MuJoCo works in radians. These conversions are the only place the two meet.
"""

from __future__ import annotations

import mujoco
import numpy as np

from chess_sim.sim.judge import Snapshot
from chess_sim.sim.scene import Scene

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
    """Per-step contact queries between the gripper and the pieces."""

    def __init__(self, scene: Scene):
        model = scene.model
        self.scene = scene
        self.body_to_slot = {slot.body: i for i, slot in enumerate(scene.slots)}
        self.piece_geoms = [np.array([g for g in range(model.ngeom)
                                      if model.geom_bodyid[g] == slot.body and model.geom_contype[g]])
                            for slot in scene.slots]
        self.gripper = scene.gripper_geoms
        self.pads = scene.jaw_geoms
        self._fromto = np.zeros(6)

    def jaw_contacts(self, data: mujoco.MjData, slot: int) -> tuple[int, bool]:
        """(number of pads touching the slot's piece, whether any gripper geom touches it)."""
        body = self.scene.slots[slot].body
        pads = set()
        touching = False
        geom_body = self.scene.model.geom_bodyid
        for contact in data.contact[:data.ncon]:
            g1, g2 = int(contact.geom1), int(contact.geom2)
            if geom_body[g1] == body:
                other = g2
            elif geom_body[g2] == body:
                other = g1
            else:
                continue
            if other in self.gripper:
                touching = True
                if other in self.pads:
                    pads.add(other)
        return len(pads), touching

    def clearance(self, data: mujoco.MjData, slot: int) -> float:
        """Smallest distance (m, capped) between any gripper geom and the slot's piece."""
        best = CLEARANCE_CAP
        for g1 in self.gripper:
            for g2 in self.piece_geoms[slot]:
                best = min(best, mujoco.mj_geomDistance(self.scene.model, data, g1, int(g2), CLEARANCE_CAP,
                                                        self._fromto))
        return max(best, 0.0)


def snapshot(scene: Scene, data: mujoco.MjData, contacts: ContactReader, start: np.ndarray, target: int,
             goal_xy: np.ndarray, clearance_within_mm: float) -> Snapshot:
    """Judge snapshot of `data`. The gripper clearance is computed only when the target is within
    `clearance_within_mm` of the goal (it matters only there and costs a few distance queries)."""
    bodies = [slot.body for slot in scene.slots]
    positions = data.xpos[bodies].copy()
    up = data.xmat[bodies][:, [2, 5, 8]].copy()
    velocities = np.array([data.qvel[slot.qvel:slot.qvel + 3] for slot in scene.slots])
    speeds = np.linalg.norm(velocities, axis=1)
    pads, touching = contacts.jaw_contacts(data, target)
    near_goal = 1000.0 * np.linalg.norm(positions[target, :2] - goal_xy) <= clearance_within_mm
    clearance = contacts.clearance(data, target) if (near_goal and not touching) else 0.0
    pad_a, pad_b = scene.jaw_geoms
    max_speed = float(speeds.max()) if np.all(np.isfinite(speeds)) else float("inf")
    if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0:
        max_speed = float("inf")
    return Snapshot(
        positions=positions, up=up, start=start, target=target, goal_xy=np.asarray(goal_xy, float),
        board_top=scene.board_top, target_speed=float(speeds[target]), max_speed=max_speed,
        jaws_on_target=pads, gripper_touches_target=touching, gripper_clearance_mm=1000.0 * clearance,
        jaw_centre=0.5 * (data.geom_xpos[pad_a] + data.geom_xpos[pad_b]),
    )


def piece_positions(scene: Scene, data: mujoco.MjData) -> np.ndarray:
    """(N, 3) base-centre positions of every piece slot."""
    return data.xpos[[slot.body for slot in scene.slots]].copy()
