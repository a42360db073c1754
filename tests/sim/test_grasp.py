"""The expert's plan geometry against hand calculations."""

import numpy as np
import pytest

from chess_sim.sim.grasp import FIXED_JAW_REACH, MOVING_JAW_REACH, closing_for, jaw_room, resumable_move, smooth


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


def test_a_resumable_move_cruises_brakes_and_goes_on_from_any_of_its_targets():
    q_from, q_to = np.zeros(6), np.array([1.0, -0.5, 0.2, 0.0, 0.3, 0.03])
    plan = resumable_move(q_from, q_to, dt=1 / 30, speed=1.2, brake=3.0)
    assert np.array_equal(plan[-1], q_to)
    steps = [float(np.abs(b[:5] - a[:5]).max()) for a, b in zip([q_from, *plan], plan)]
    assert steps[0] == pytest.approx(1.2 / 30)  # full speed at once
    assert max(steps) <= 1.2 / 30 + 1e-12 and steps[-2] < steps[len(steps) // 2]  # slows down before the end
    for k in (3, len(plan) // 2, len(plan) - 3):  # a plan from its own k-th target is the rest of it
        rest = resumable_move(plan[k], q_to, dt=1 / 30, speed=1.2, brake=3.0)
        assert all(np.array_equal(a, b) for a, b in zip(rest, plan[k + 1:])) and len(rest) == len(plan) - k - 1
