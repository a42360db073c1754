"""The expert's plan geometry against hand calculations."""

import numpy as np
import pytest

from chess_sim.sim.grasp import FIXED_JAW_REACH, MOVING_JAW_REACH, closing_for, jaw_room, smooth


def test_jaw_room_is_the_nearest_neighbour_to_either_open_jaw():
    point, closing = np.array([0.2, 0.0, 0.03]), np.array([0.0, 1.0, 0.0])
    neighbours = np.array([[0.2, 0.025], [0.2, -0.025]])  # one square either side along the closing direction
    assert jaw_room(point, closing, neighbours) == pytest.approx(0.025 - MOVING_JAW_REACH)
    assert jaw_room(point, -closing, neighbours) == pytest.approx(0.025 - MOVING_JAW_REACH)
    assert jaw_room(point, closing, neighbours[1:]) == pytest.approx(0.025 - FIXED_JAW_REACH)
    assert jaw_room(point, closing, np.zeros((0, 2))) == np.inf


def test_closing_for_keeps_the_hint_upright_and_turns_it_tangential_when_tilted():
    point, hint = np.array([0.2, 0.2, 0.03]), np.array([1.0, 0.0, 0.0])
    assert np.allclose(closing_for(point, 2.0 * hint, 0.0), hint)
    tangent = closing_for(point, hint, np.deg2rad(16.0))
    assert np.allclose(tangent, [np.sqrt(0.5), -np.sqrt(0.5), 0.0])  # perpendicular to the radial (1, 1)
    assert np.allclose(closing_for(point, -hint, np.deg2rad(16.0)), -tangent)


def test_smooth_eases_from_the_start_excluded_to_the_end_included():
    q_from, q_to = np.zeros(6), np.ones(6)
    path = np.array(smooth(q_from, q_to, 4))
    assert path.shape == (4, 6) and np.allclose(path[-1], q_to)
    assert np.allclose(path[:, 0], 0.5 - 0.5 * np.cos(np.pi * np.arange(1, 5) / 4))
    ease_in_only = np.array(smooth(q_from, q_to, 4, ease=(True, False)))[:, 0]
    assert np.all(np.diff(ease_in_only) > 0) and np.diff(ease_in_only)[0] < np.diff(ease_in_only)[-1]
    assert np.allclose(np.array(smooth(q_from, q_to, 4, ease=(False, False)))[:, 0], [0.25, 0.5, 0.75, 1.0])
