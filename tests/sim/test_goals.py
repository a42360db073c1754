"""The expert's goal choices by hand: capture-area points, the middle of a reachable run, relay squares."""

import numpy as np
import pytest

from chess_sim.config import BoardConfig
from chess_sim.sim.goals import RELAY_SQUARES, area_points, middle_of_longest_run, relay_squares
from chess_sim.sim.tasks import square_center


def test_area_points_run_along_the_middle_inside_the_ends():
    points = area_points((0.11, 0.31, -0.165, -0.125))
    assert [round(float(p[0]), 3) for p in points] == [0.125, 0.145, 0.165, 0.185, 0.205, 0.225, 0.245, 0.265,
                                                       0.285]
    assert all(p[1] == pytest.approx(-0.145) for p in points)


@pytest.mark.parametrize("reached, middle", [([], None), ([False, False], None), ([True], 0),
                                             ([False, True, True, True, False, True], 2),
                                             ([True, True, False, True, True, True, True], 4),
                                             ([True, True, False, True, True], 0)])
def test_middle_of_longest_run(reached, middle):
    assert middle_of_longest_run(reached) == middle


def test_relay_squares_are_free_and_halfway_in_distance():
    board = BoardConfig()
    pick, goal = np.array(square_center("b7", board)), np.array(square_center("h1", board))
    pieces = np.array([square_center(name, board) for name in ("d4", "e4", "c6")])
    squares = relay_squares(board, pieces, pick, goal)
    assert len(squares) == RELAY_SQUARES
    occupied = [*pieces, pick, goal]
    assert all(min(np.linalg.norm(s - o) for o in occupied) > 0.02 for s in squares)
    middle = (np.linalg.norm(pick) + np.linalg.norm(goal)) / 2
    gaps = [abs(np.linalg.norm(s) - middle) for s in squares]
    assert gaps == sorted(gaps) and gaps[0] < 0.005
