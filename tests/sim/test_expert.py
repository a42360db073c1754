"""The scripted expert on a small fixed sample, and taking over mid-episode."""

from dataclasses import replace

import numpy as np
import pytest

from chess_sim.config import profile
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.episodes import expert_episode
from chess_sim.sim.expert import ExpertDriver
from chess_sim.sim.pieces import piece_shape

SEED = 5_500_001


@pytest.fixture(scope="module")
def env():
    environment = ChessEnv(replace(profile("baseline"), render=False, early_stop=True))
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def expert(env):
    return ExpertDriver(env)


@pytest.mark.slow
def test_expert_solves_a_fixed_sample_of_pawn_and_knight_moves(env, expert):
    rows = [expert_episode(env, expert, SEED, index)[0] for index in range(6)]
    assert {row["piece"] for row in rows} == {"pawn", "knight"}
    for row in rows:
        assert row["end"] == "success", row
        assert row["place_error_mm"] <= 3.0
        assert row["clean_lift"] is True


def test_expert_takes_over_after_a_random_start(env, expert):
    env.reset(seed=SEED, options={"index": 1})
    rng = np.random.default_rng(0)
    home = env.rest_action()
    for _ in range(20):  # wander near the rest pose first
        env.step(home + rng.normal(0.0, 4.0, size=6).astype(np.float32))
    for _ in range(env.cfg.max_steps):
        _, _, terminated, truncated, info = env.step(expert.action())
        if terminated or truncated:
            break
    assert info["end"] == "success"


def test_expert_actions_are_in_lerobot_units(env, expert):
    env.reset(seed=SEED, options={"index": 0})
    action = expert.action()
    assert action.shape == (6,) and action.dtype == np.float32
    assert np.all(action >= env.units.lower - 1e-3) and np.all(action <= env.units.upper + 1e-3)
    assert 0.0 <= action[5] <= 100.0


def test_expert_rollout_does_not_depend_on_earlier_scenes(env, expert):
    def rollout(environment, driver, steps=120):
        environment.reset(seed=SEED, options={"index": 7})
        for _ in range(steps):
            environment.step(driver.action())
        return environment.data.qpos.copy()

    for index in range(3):  # use the expert's IK (and any random restarts) on other scenes first
        env.reset(seed=SEED, options={"index": index})
        for _ in range(30):
            env.step(expert.action())
    fresh = ChessEnv(replace(profile("baseline"), render=False, early_stop=True))
    assert np.array_equal(rollout(env, expert), rollout(fresh, ExpertDriver(fresh)))


def test_expert_check_runs_on_a_copy(env, expert):
    env.reset(seed=SEED, options={"index": 0})
    assert expert.solves() is True
    assert env.steps == 0 and env.data.time == 0.0
    fresh = ChessEnv(replace(profile("baseline"), render=False, early_stop=True))
    fresh.reset(seed=SEED, options={"index": 0})
    assert np.array_equal(fresh.data.qpos, env.data.qpos)


def _holding_far_from_the_base(env, expert):
    """Scene 4 (a pawn to a square the expert reaches only tilted 16 degrees) driven until the expert holds the piece
    and starts placing it."""
    env.reset(seed=SEED, options={"index": 4})
    env.step(expert.action())  # the expert starts this scene (its phase may still be another scene's)
    while expert.expert.phase != "place":
        env.step(expert.action())
    assert np.rad2deg(expert.expert.grip.tilt) == pytest.approx(16.0)


def test_a_takeover_with_the_piece_in_hand_places_it_tilted_from_where_the_arm_stands(env, expert):
    """A fresh expert (which did not pick, so knows no grip) takes over a held piece bound for a far square: it
    chooses a reachable tilt rather than giving up, and its first command continues from the present joints."""
    _holding_far_from_the_base(env, expert)
    driver = ExpertDriver(env)
    with driver.on_a_copy():
        present = env.units.to_units(env.data.qpos[env.scene.arm_qpos])
        first = driver.action()
        for _ in range(env.cfg.max_steps):
            _, _, terminated, truncated, info = env.step(driver.action())
            if terminated or truncated:
                break
        assert driver.expert.gave_up is None
        assert np.rad2deg(driver.expert.grip.tilt) == pytest.approx(16.0)
    assert info["end"] == "success"
    assert np.abs(first - present)[:5].max() < 2.0


def test_an_expert_that_finds_no_plan_holds_the_arm_where_it_stands(env, expert, monkeypatch):
    """Giving up on a takeover must not command the rest pose (a jump of up to 180 degrees of wrist roll)."""
    _holding_far_from_the_base(env, expert)
    driver = ExpertDriver(env)
    monkeypatch.setattr(driver.expert, "_reachable", lambda pose: False)
    with driver.on_a_copy():
        present = env.units.to_units(env.data.qpos[env.scene.arm_qpos])
        held = [driver.action() for _ in range(3)]
        assert driver.expert.gave_up == "no approach tilt places the piece in hand"
    assert all(np.allclose(command, present, atol=1e-3) for command in held)


def test_an_expert_taking_over_mid_descent_goes_on_as_the_one_that_started_it(env, expert):
    """A fresh expert taking over 2.5 cm above the grasp, on the way down, commands what the expert that planned
    the descent commands (DAgger's labels agree with the demonstrations' there), not a climb back to hover."""
    env.reset(seed=SEED, options={"index": 2})
    body = env.scene.slots[env.target_slot].body
    grasp = piece_shape(env.task.piece).grasp_height
    while True:
        command = expert.action()
        height = env.data.site_xpos[env.scene.tcp_site][2] - env.data.xpos[body][2] - grasp
        if expert.expert.phase == "pick" and height < 0.025 and len(expert.expert.plan) > 30:
            break
        env.step(command)
    fresh = ExpertDriver(env)
    with fresh.on_a_copy():
        taking_over = [fresh.action()]
        for _ in range(29):
            env.step(taking_over[-1])
            taking_over.append(fresh.action())
    planned = [command]
    for _ in range(29):
        env.step(planned[-1])
        planned.append(expert.action())
    assert np.abs(np.array(taking_over) - np.array(planned)).max() < 2.0


def test_expert_captures_and_relays_a_long_move_through_a_free_square():
    env = ChessEnv(replace(profile("baseline", "captures"), render=False, early_stop=True))
    driver = ExpertDriver(env)
    relayed = []
    choose = driver.expert._relay_grip
    driver.expert._relay_grip = lambda *args: relayed.append(driver.expert.leg) or choose(*args)
    # a queen takes a pawn; a bishop from b7 takes a rook on h1, too far apart for one approach tilt
    for index, instruction in ((0, "Capture the black pawn on b5 with the white queen from a4."),
                               (148, "Capture the white rook on h1 with the black bishop from b7.")):
        row, _ = expert_episode(env, driver, SEED, index)
        assert row["instruction"] == instruction
        assert (row["end"], row["captured"], row["legs_done"]) == ("success", instruction.split()[3], 2), row
        assert row["place_error_mm"] <= 3.0
    assert relayed == [1]  # only the bishop's leg needed a relay square
    env.close()
