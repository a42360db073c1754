"""Where the scripted expert (`sim/expert.py`) may set a piece down when a leg leaves it a choice: points along the
capture area, the middle of the stretch of them an approach tilt reaches, and free squares to relay a long move
through. Pure functions over world positions in metres (x across the board away from the arm's base)."""

from __future__ import annotations

import chess
import numpy as np

from chess_sim.config import BoardConfig
from chess_sim.sim.tasks import square_center

AREA_STEP = 0.02
"""Spacing of the points along the capture area's middle tried as a captured piece's goal."""
AREA_MARGIN = 0.015
"""The points keep this far inside the area's ends (a piece's base radius and some)."""
RELAY_SQUARES = 8
"""Free squares tried as a relay, those halfway between the piece and its goal in distance from the base first."""
RELAY_CLEARANCE = 0.02
"""A relay square's centre stands at least this far from every piece on the board."""


def area_points(area: tuple[float, float, float, float]) -> list[np.ndarray]:
    """(2,) goals along the middle of an area (x from, x to, y from, y to), `AREA_STEP` apart and `AREA_MARGIN` inside
    its ends, in order of x: which of them a tilt reaches depends on their distance from the arm's base."""
    x0, x1, y0, y1 = area
    return [np.array([x, (y0 + y1) / 2]) for x in np.arange(x0 + AREA_MARGIN, x1 - AREA_MARGIN + 1e-9, AREA_STEP)]


def middle_of_longest_run(reached: list[bool]) -> int | None:
    """Index of the middle of the longest run of True (the first of equal runs), None when there is none: a goal
    well inside what a tilt reaches, not at the edge where the plan's own waypoints fail."""
    runs, start = [], None
    for i, ok in enumerate([*reached, False]):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            runs.append((start, i))
            start = None
    if not runs:
        return None
    first, end = max(runs, key=lambda run: run[1] - run[0])
    return (first + end - 1) // 2


def relay_squares(board: BoardConfig, pieces_xy: np.ndarray, pick_xy: np.ndarray, goal_xy: np.ndarray
                  ) -> list[np.ndarray]:
    """Up to `RELAY_SQUARES` centres (2,) of squares free of the pieces (M, 2) on the board, the piece being moved
    and its goal, those whose distance from the base is nearest halfway between the piece's and the goal's first."""
    occupied = np.vstack([np.reshape(pieces_xy, (-1, 2)), pick_xy[None], goal_xy[None]])
    centres = [np.array(square_center(name, board)) for name in chess.SQUARE_NAMES]
    free = [c for c in centres if np.min(np.linalg.norm(occupied - c, axis=1)) > RELAY_CLEARANCE]
    middle = (np.linalg.norm(pick_xy) + np.linalg.norm(goal_xy)) / 2
    return sorted(free, key=lambda c: abs(np.linalg.norm(c) - middle))[:RELAY_SQUARES]
