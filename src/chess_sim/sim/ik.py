"""Inverse kinematics of the SO-101's tool point (`tcp` site) by damped least squares on MuJoCo Jacobians.

A `Pose` asks for the tcp position, the approach direction (the tcp's -z axis: where the fingertips point)
and the closing direction (the tcp's +x axis: from the fixed jaw towards the moving one). The SO-101 has five
arm joints, so a pose is reachable only when the approach lies in the arm's vertical plane; the closing
direction is then free (wrist roll). Far squares need an approach tilted away from the base.

Joint vectors here are the five arm joints in radians, in `JOINT_NAMES` order without the gripper.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

ARM_JOINTS = 5
POSITION_TOLERANCE = 0.0005
"""A solve counts as reached within 0.5 mm ..."""
ANGLE_TOLERANCE = np.deg2rad(2.0)
"""... and 2 degrees of approach and closing direction."""
DAMPING = 1e-3
ORIENTATION_WEIGHT = 0.05
"""Metres per radian when position and orientation errors share one least-squares problem."""
MAX_ITERATIONS = 150
MAX_STEP = 0.2
"""Largest joint change per iteration (rad): keeps the linearisation honest."""


@dataclass(frozen=True)
class Pose:
    position: np.ndarray
    """(3,) world position of the tcp."""
    approach: np.ndarray
    """(3,) unit vector the fingertips point along."""
    closing: np.ndarray
    """(3,) unit vector from the fixed jaw to the moving jaw; perpendicular to `approach`."""


@dataclass(frozen=True)
class Solution:
    q: np.ndarray
    """(5,) arm joints, rad."""
    position_error: float
    angle_error: float

    @property
    def ok(self) -> bool:
        return self.position_error <= POSITION_TOLERANCE and self.angle_error <= ANGLE_TOLERANCE


class ArmIK:
    """Solver bound to one model; it owns a scratch MjData so the caller's simulation is never touched."""

    def __init__(self, model: mujoco.MjModel, arm_qpos: np.ndarray, arm_dof: np.ndarray, tcp_site: int):
        self.model = model
        self.data = mujoco.MjData(model)
        self.qpos_idx = np.asarray(arm_qpos[:ARM_JOINTS])
        self.dof_idx = np.asarray(arm_dof[:ARM_JOINTS])
        self.site = tcp_site
        joint_ids = model.dof_jntid[self.dof_idx]
        self.lower = model.jnt_range[joint_ids, 0].copy()
        self.upper = model.jnt_range[joint_ids, 1].copy()
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))

    def forward(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """tcp position (3,) and rotation matrix (3, 3) for arm joints q."""
        self.data.qpos[self.qpos_idx] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy(), self.data.site_xmat[self.site].reshape(3, 3).copy()

    def _errors(self, q: np.ndarray, pose: Pose) -> tuple[np.ndarray, float, float]:
        position, rot = self.forward(q)
        z_now, x_now = rot[:, 2], rot[:, 0]
        z_goal = -pose.approach
        rot_error = np.cross(z_now, z_goal) + np.cross(x_now, pose.closing)
        angle = max(_angle(z_now, z_goal), _angle(x_now, pose.closing))
        return np.concatenate([pose.position - position, ORIENTATION_WEIGHT * rot_error]), \
            float(np.linalg.norm(pose.position - position)), angle

    def solve(self, pose: Pose, q_start: np.ndarray, rng: np.random.Generator | None = None,
              restarts: int = 6, fallback: np.ndarray | None = None) -> Solution:
        """Best solution from `q_start`, then from `fallback` (a known good posture), then from random starts
        while the pose is not reached: a warm start alone can stall against a joint limit."""
        best = self._descend(pose, np.clip(q_start, self.lower, self.upper))
        rng = rng if rng is not None else np.random.default_rng(0)
        starts = ([] if fallback is None else [fallback]) + [None] * restarts
        for start in starts:
            if best.ok:
                break
            start = rng.uniform(self.lower, self.upper) if start is None else start
            candidate = self._descend(pose, start)
            if (candidate.ok, -candidate.position_error) > (best.ok, -best.position_error):
                best = candidate
        return best

    def _descend(self, pose: Pose, q: np.ndarray) -> Solution:
        q = q.copy()
        for _ in range(MAX_ITERATIONS):
            error, pos_err, ang_err = self._errors(q, pose)
            if pos_err <= POSITION_TOLERANCE * 0.2 and ang_err <= ANGLE_TOLERANCE * 0.2:
                break
            mujoco.mj_comPos(self.model, self.data)
            mujoco.mj_jacSite(self.model, self.data, self._jacp, self._jacr, self.site)
            jac = np.vstack([self._jacp[:, self.dof_idx], ORIENTATION_WEIGHT * self._jacr[:, self.dof_idx]])
            step = jac.T @ np.linalg.solve(jac @ jac.T + DAMPING**2 * np.eye(6), error)
            step *= min(1.0, MAX_STEP / (np.abs(step).max() + 1e-12))
            q = np.clip(q + step, self.lower, self.upper)
        _, pos_err, ang_err = self._errors(q, pose)
        return Solution(q=q, position_error=pos_err, angle_error=ang_err)


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.arccos(np.clip(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0)))


def grasp_pose(position: np.ndarray, closing_hint: np.ndarray, tilt_rad: float) -> Pose:
    """A pose reaching `position` from above, tilted by `tilt_rad` away from the base (about the vertical
    plane through the base axis), with the closing direction nearest to the horizontal `closing_hint`."""
    radial = np.array([position[0], position[1], 0.0])
    radial /= np.linalg.norm(radial)
    approach = np.array([0.0, 0.0, -np.cos(tilt_rad)]) + np.sin(tilt_rad) * radial
    closing = closing_hint - np.dot(closing_hint, approach) * approach
    return Pose(position=np.asarray(position, float), approach=approach, closing=closing / np.linalg.norm(closing))
