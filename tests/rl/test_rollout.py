"""Training rollouts decided in the simulators' processes: the same decisions, bit for bit, as when this process
decides on the same schedule (one group holding every simulator of one process), for a run that keeps no
likelihoods (`compact`: success-filtered flow matching, its chain in bfloat16) and one that scores the chain and
explores the spread (PPO from the compact profile's learned start, `SPREAD`)."""

from dataclasses import replace

import pytest
import torch

from chess_sim.config import RL_PROFILES, CameraConfig, PPOConfig, profile
from chess_sim.rl.rollout import RolloutDriver
from chess_sim.rl.runner import build, training_env
from chess_sim.rl.storage import Storage
from chess_sim.scheduler import drive
from chess_sim.sim.vec_env import VecChessEnv
from chess_sim.threads import torch_threads

pytestmark = pytest.mark.slow  # simulator processes

ENV = replace(profile("baseline"), episode_seconds=2.0, camera=CameraConfig(64, 64))
SEED = 7_700_003
CONFIGS = {
    "compact": RL_PROFILES["compact"].config(),
    # PPO that leaves the velocity as it is and learns the start's spread alone, explored per decision (a faint chain
    # noise keeps every likelihood exact)
    "spread": replace(RL_PROFILES["compact"], algorithm="ppo",
                      ppo=PPOConfig(lr=0.0, spread_noise=0.3, sigma_start=0.01, sigma_end=0.001)).config(),
}


def rollout(algorithm, vec, in_simulators: bool):
    driver = RolloutDriver(algorithm, torch.Generator().manual_seed(0), Storage(), in_simulators=in_simulators)
    drive(vec, SEED, list(range(8)), driver, groups=1)
    return driver


def flat(value):
    if value is None:
        return []
    if isinstance(value, dict):
        return [tensor for key in sorted(value) for tensor in flat(value[key])]
    if isinstance(value, tuple):
        return [tensor for item in value for tensor in flat(item)]
    return [value]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_decisions_made_in_the_simulators_are_those_made_here(tiny_policy_dir, name):
    algorithm = build(tiny_policy_dir, CONFIGS[name])
    env = replace(training_env(algorithm.model, ENV), early_stop=False)  # episodes of several decisions
    # one process: the same schedule both ways; one thread here, as the workers (a thread count changes last bits)
    with VecChessEnv(2, env, processes=1) as vec, torch_threads(1):
        here, there = (rollout(algorithm, vec, remote) for remote in (False, True))
    assert here.rows == there.rows and len(here.storage) == len(there.storage) > len(here.rows)
    scored = name == "spread"  # what each rollout keeps
    assert all((d.log_probs is not None, d.spread is not None) == (scored, scored) for d in here.storage.decisions)
    for mine, theirs in zip(here.storage.decisions, there.storage.decisions):
        assert mine.reward == theirs.reward and mine.value == theirs.value
        for field in ("chain", "log_probs", "state", "prefix", "spread", "spread_log_prob"):
            pairs = list(zip(flat(getattr(mine, field)), flat(getattr(theirs, field)), strict=True))
            assert all(torch.equal(a, b) for a, b in pairs), field
    assert there.parts["policy"] > 0 and there.parts["sample"] == 0.0


class Unloadable:
    def __reduce__(self):
        return (_refuse, ())


def test_a_policy_that_cannot_be_unpickled_in_the_simulators_is_a_one_line_error():
    with VecChessEnv(1, ENV) as vec:
        with pytest.raises(RuntimeError, match="simulator process 0: the policy cannot be loaded here"):
            vec.set_actor(Unloadable())
        vec.reset_many({0: (SEED, 0)})
        draws = (torch.zeros(1, 50, 6), None, None)  # x0, chain noise, spread draws
        with pytest.raises(RuntimeError, match="no policy was given to this process"):
            vec.collect(vec.submit({0: ("act", (draws, False))}))


def _refuse():
    raise ValueError("not here")
