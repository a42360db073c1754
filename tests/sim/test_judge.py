"""Judge rules on hand-made states: 3 pieces, target is piece 0, goal square centre at (0.2, 0.0)."""

import math

import numpy as np
import pytest

from chess_sim.config import BoardConfig, JudgeConfig
from chess_sim.sim.judge import Judge, Snapshot

TOP = 0.006
GOAL = np.array([0.2, 0.0])
START = np.array([[0.175, 0.0, TOP], [0.2, 0.025, TOP], [0.225, -0.05, TOP]])
UPRIGHT = np.tile([0.0, 0.0, 1.0], (3, 1))


def snap(positions=None, up=None, touching=False, pads=0, clearance=50.0, speed=0.0, max_speed=0.0,
         jaw_centre=(0.175, 0.0, 0.02)):
    return Snapshot(
        positions=np.array(START if positions is None else positions, float),
        up=np.array(UPRIGHT if up is None else up, float), start=START, target=0, goal_xy=GOAL,
        board_top=TOP, target_speed=speed, max_speed=max_speed, jaws_on_target=pads,
        gripper_touches_target=touching, gripper_clearance_mm=clearance, jaw_centre=np.array(jaw_centre))


def judge(early_stop=False):
    return Judge(JudgeConfig(), BoardConfig(), early_stop=early_stop)


def moved(target_xyz, others=None):
    positions = START.copy()
    positions[0] = target_xyz
    if others is not None:
        positions[1:] = others
    return positions


def tilted(degrees, index=0):
    up = UPRIGHT.copy()
    up[index] = [math.sin(math.radians(degrees)), 0.0, math.cos(math.radians(degrees))]
    return up


def test_piece_placed_1mm_off_is_success():
    j = judge()
    assert j.update(snap(moved([0.201, 0.0, TOP]))) == "success"
    assert j.measurements()["place_error_mm"] == pytest.approx(1.0, abs=1e-6)


def test_piece_placed_outside_tolerance_is_not_success():
    j = judge()
    assert j.update(snap(moved([0.2 + 0.007, 0.0, TOP]))) is None
    assert j.timeout_end() == "timeout"


def test_not_released_or_gripper_too_close_is_not_success():
    on_goal = moved([0.2, 0.0, TOP])
    assert judge().update(snap(on_goal, touching=True, pads=2)) is None
    assert judge().update(snap(on_goal, clearance=5.0)) is None
    assert judge().update(snap(on_goal, clearance=10.0)) == "success"


def test_toppled_target_ends_only_with_early_stop():
    lying = tilted(80.0)
    j = judge()
    for _ in range(9):  # 0.3 s at 30 Hz
        assert j.update(snap(up=lying)) is None
    assert j.timeout_end() == "toppled"
    stopping = judge(early_stop=True)
    ends = [stopping.update(snap(up=lying)) for _ in range(9)]
    assert ends[:8] == [None] * 8 and ends[8] == "toppled"


def test_a_piece_that_rocks_back_within_a_third_of_a_second_did_not_topple():
    j = judge(early_stop=True)
    for _ in range(5):
        assert j.update(snap(up=tilted(25.0))) is None
    assert j.update(snap(moved([0.2, 0.0, TOP]))) == "success"


def test_toppled_neighbour_counts_as_toppled():
    j = judge(early_stop=True)
    ends = [j.update(snap(up=tilted(60.0, index=2))) for _ in range(9)]
    assert ends[-1] == "toppled"


def test_neighbour_pushed_5mm_is_disturbed_and_blocks_success():
    others = START[1:].copy()
    others[0, 1] += 0.005
    j = judge(early_stop=False)
    assert j.update(snap(moved([0.2, 0.0, TOP], others))) is None  # on goal, but a neighbour moved
    assert j.timeout_end() == "disturbed"
    assert judge(early_stop=True).update(snap(moved(START[0], others))) == "disturbed"


def test_neighbour_pushed_2mm_is_tolerated():
    others = START[1:].copy()
    others[0, 1] += 0.002
    assert judge().update(snap(moved([0.2, 0.0, TOP], others))) == "success"


def test_piece_released_in_the_air_is_dropped():
    j = judge()
    assert j.update(snap(moved([0.19, 0.0, TOP + 0.03]), speed=0.3)) is None
    assert j.dropped
    assert j.timeout_end() == "dropped"


def test_knight_rotated_about_its_axis_still_counts_upright():
    yawed = UPRIGHT.copy()  # yaw leaves the axis vertical
    assert judge().update(snap(moved([0.2, 0.0, TOP]), up=yawed)) == "success"
    assert judge().update(snap(moved([0.2, 0.0, TOP]), up=tilted(20.0))) is None


def test_clean_lift_and_close_lateral():
    j = judge()
    j.update(snap(moved([0.175, 0.0, TOP + 0.021]), touching=True, pads=2, jaw_centre=(0.178, 0.004, 0.03)))
    m = j.measurements()
    assert m["clean_lift"] is True
    assert m["close_lateral_mm"] == pytest.approx(5.0, abs=1e-6)


def test_unstable_on_nan_or_speed():
    assert judge().update(snap(max_speed=50.0)) == "unstable"
    bad = START.copy()
    bad[2, 0] = np.nan
    assert judge().update(snap(bad)) == "unstable"


def test_max_tilt_hand_value():
    j = judge()
    j.update(snap(up=tilted(45.0)))
    j.update(snap())
    assert j.measurements()["max_tilt_deg"] == pytest.approx(45.0)


def test_no_success_while_a_neighbour_leans():
    assert judge().update(snap(moved([0.2, 0.0, TOP]), up=tilted(30.0, index=1))) is None


AREA = (0.1, 0.3, -0.17, -0.13)


def capture_snap(positions, last_leg=False, finished=(), target=0, clearance=50.0):
    """A capture's first leg: piece 0 to the capture area on the table (z = 0); or its last leg, piece 1 to GOAL."""
    snapshot = snap(positions, clearance=clearance)
    snapshot.target = target
    if not last_leg:
        snapshot.goal_area, snapshot.goal_top = AREA, 0.0
    snapshot.finished, snapshot.last_leg = finished, last_leg
    return snapshot


def test_a_captured_piece_set_down_anywhere_in_its_area_ends_the_leg_not_the_episode():
    j = judge(early_stop=True)
    assert j.update(capture_snap(moved([0.29, -0.16, 0.0]))) is None  # off the board, yet neither dropped nor won
    assert j.leg_done and j.failure is None and not j.dropped
    j.next_leg()
    assert not j.leg_done
    # the mover on its square finishes the capture; the captured piece far from its start is no disturbance
    mover_home = moved([0.29, -0.16, 0.0], others=[[0.2, 0.0, TOP], START[2]])
    assert j.update(capture_snap(mover_home, last_leg=True, finished=(0,), target=1)) == "success"


def test_a_captured_piece_outside_its_area_or_floating_is_not_set_down():
    assert judge().update(capture_snap(moved([0.29, -0.12, 0.0]))) is None  # 10 mm short of the area
    j = judge()
    j.update(capture_snap(moved([0.2, -0.15, 0.006])))  # 6 mm above the table: not standing on it
    assert not j.leg_done
    without_leg = judge()
    assert without_leg.update(capture_snap(moved([0.2, -0.15, 0.0]), clearance=5.0)) is None  # jaws too close
    assert not without_leg.leg_done


def test_a_piece_held_off_the_board_is_not_dropped():
    j = judge(early_stop=True)
    carried = snap(moved([0.2, -0.15, 0.05]), touching=True, pads=2, speed=0.1)  # over the table, in the jaws
    assert j.update(carried) is None and not j.dropped
    assert j.timeout_end() == "timeout"
    released = judge(early_stop=True)
    assert released.update(snap(moved([0.2, -0.15, 0.0]))) == "dropped"  # let go off the board, at rest
