"""Inverse kinematics against forward kinematics."""

import numpy as np
import pytest

from chess_sim.config import profile
from chess_sim.sim.ik import ArmIK, grasp_pose
from chess_sim.sim.scene import build_scene


@pytest.fixture(scope="module")
def ik():
    scene = build_scene(profile("baseline"))
    return ArmIK(scene.model, scene.arm_qpos, scene.arm_dof, scene.tcp_site)


@pytest.mark.parametrize("target, tilt_deg", [((0.2, 0.0, 0.03), 0.0), ((0.25, -0.05, 0.05), 0.0),
                                              ((0.33, 0.0875, 0.02), 20.0)])
def test_solution_reaches_the_pose(ik, target, tilt_deg):
    pose = grasp_pose(np.array(target), np.array([0.0, 1.0, 0.0]), np.deg2rad(tilt_deg))
    solution = ik.solve(pose, np.zeros(5), np.random.default_rng(0))
    assert solution.ok
    position, rot = ik.forward(solution.q)
    assert np.linalg.norm(position - pose.position) < 5e-4
    assert np.dot(-rot[:, 2], pose.approach) > np.cos(np.deg2rad(2.0))
    assert np.all(solution.q >= ik.lower) and np.all(solution.q <= ik.upper)


def test_grasp_pose_tilts_away_from_the_base():
    pose = grasp_pose(np.array([0.3, 0.0, 0.02]), np.array([0.0, 1.0, 0.0]), np.deg2rad(30.0))
    assert pose.approach == pytest.approx([0.5, 0.0, -np.cos(np.deg2rad(30.0))])
    assert abs(np.dot(pose.approach, pose.closing)) < 1e-12


def test_far_corner_is_out_of_reach_vertically(ik):
    pose = grasp_pose(np.array([0.33, 0.0875, 0.02]), np.array([0.0, 1.0, 0.0]), 0.0)
    assert not ik.solve(pose, np.zeros(5), np.random.default_rng(0), restarts=2).ok
