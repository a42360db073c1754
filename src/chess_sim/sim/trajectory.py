"""The trajectory pieces every plan of the scripted expert (`sim/expert.py`) is built from: free joint moves,
straight tcp segments solved by inverse kinematics, gripper moves, all as lists of joint targets (6,) in radians at
the control rate, the gripper last.

`TrajectoryPieces` is the expert's base class; it reads the expert's `ik` (`ik.ArmIK`), `rng` (IK restarts, reseeded
per scene), `dt` (control period), `home_rad` (the rest pose, IK's fallback) and `grip` (its tilt sets every
pose's approach; None: vertical).
"""

from __future__ import annotations

import numpy as np

from chess_sim.sim.grasp import resumable_move, smooth
from chess_sim.sim.ik import Pose, Solution, grasp_pose

GRIPPER_OPEN_RAD = 0.03
"""Jaw faces 6 and 12 mm either side of the piece axis: room for a 4-4.3 mm grasp section plus the 2 mm
offset, while the moving finger's outside stays clear of a neighbour 25 mm away (0.1 rad already hits it)."""
ARM_SPEED = 1.2
"""rad/s of the fastest joint on free moves."""
ARM_BRAKE = 3.0
"""rad/s^2 of the fastest joint stopping at the end of a free move (they start at full speed: see `resumable_move`;
a DAgger takeover mid-move then goes on as the demonstration did)."""
LINEAR_SPEED = 0.06
"""m/s on descents, lifts and retreats."""
SEGMENT_STEP = 0.01
"""IK points every 1 cm along straight segments."""


class Unreachable(Exception):
    """No IK solution for a waypoint of the plan being built."""


class TrajectoryPieces:
    """Plan segments of the scripted expert (see the module docstring for the attributes they read)."""

    def _solve(self, position: np.ndarray, closing: np.ndarray, q_near: np.ndarray) -> Solution:
        pose = grasp_pose(position, closing, self.grip.tilt if self.grip else 0.0)
        return self.ik.solve(pose, q_near[:5], self.rng, fallback=self.home_rad[:5])

    def _free_move(self, q_from: np.ndarray, position: np.ndarray, closing: np.ndarray,
                   gripper: float = GRIPPER_OPEN_RAD) -> list[np.ndarray]:
        solution = self._solve(position, closing, q_from)
        if not solution.ok:
            raise Unreachable(f"tcp position {position}")
        return self._joint_move(q_from, np.append(solution.q, gripper))

    def _joint_move(self, q_from: np.ndarray, q_to: np.ndarray) -> list[np.ndarray]:
        return resumable_move(q_from, q_to, self.dt, ARM_SPEED, ARM_BRAKE)

    def _line(self, q_from: np.ndarray, start: np.ndarray, end: np.ndarray, closing: np.ndarray, gripper: float,
              speed: float = LINEAR_SPEED, keep_orientation: bool = False) -> list[np.ndarray]:
        """Straight tcp segment: IK every SEGMENT_STEP, joint-space interpolation between them."""
        length = float(np.linalg.norm(end - start))
        points = max(1, int(np.ceil(length / SEGMENT_STEP)))
        steps_per_point = max(1, round(length / speed / self.dt / points))
        plan: list[np.ndarray] = []
        q = np.append(q_from[:5], gripper)
        for k in range(1, points + 1):
            target = start + (end - start) * k / points
            if keep_orientation:
                q_next = self._track(q, target)
            else:
                solution = self._solve(target, closing, q)
                if not solution.ok:
                    raise Unreachable(f"tcp position {target}")
                q_next = np.append(solution.q, gripper)
            plan += smooth(q, q_next, steps_per_point, ease=(k == 1, k == points))
            q = q_next
        return plan

    def _track(self, q: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Move the tcp to `target` keeping its current orientation (lifting a piece held at any angle)."""
        _, rot = self.ik.forward(q[:5])
        pose = Pose(position=target, approach=-rot[:, 2], closing=rot[:, 0])
        solution = self.ik.solve(pose, q[:5], self.rng, restarts=2, fallback=self.home_rad[:5])
        if not solution.ok:
            raise Unreachable(f"tcp position {target}")
        return np.append(solution.q, q[5])

    def _gripper(self, q: np.ndarray, value: float, seconds: float) -> list[np.ndarray]:
        target = q.copy()
        target[5] = value
        steps = max(1, round(seconds / self.dt))
        half = steps // 2
        return smooth(q, target, half) + [target] * (steps - half)

    def _open_gripper(self, q: np.ndarray, seconds: float) -> list[np.ndarray]:
        """Open the jaws where the arm stands (a single step when they are open already)."""
        opened = np.append(q[:5], GRIPPER_OPEN_RAD)
        if abs(q[5] - GRIPPER_OPEN_RAD) < 0.02:
            return [opened]
        return smooth(q, opened, max(1, round(seconds / self.dt)))
