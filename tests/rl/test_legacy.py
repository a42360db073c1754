"""Run directories begun before RL had one module per algorithm: their `args.json` read in today's layout (so they
resume), and the one-line refusal of those that used a setting that left the core."""

import pytest

from chess_sim.config import RL_PROFILES, replace_fields
from chess_sim.rl.legacy import LAST_COMMIT, current_layout, run_defining
from chess_sim.runs import RunError

# the `rl` tree of the main job's args.json as commit 0b5ba4f wrote it
MAIN_JOB_BEFORE = {
    "algorithm": "filtered",
    "run": {"iterations": 3, "minutes": 12.0, "episodes": 224, "envs": 16, "policy_in_simulators": True,
            "chain_dtype": "bfloat16", "train_seed": 7800003, "val_seed": 9300003, "val_episodes": 20, "val_every": 1,
            "save_every": 1, "torch_threads": 1, "seed": 0, "report_videos": 6, "tensorboard": False,
            "action_steps": 0, "denoise_steps": 0, "time_power": 0},
    "ppo": {"gamma": 0.99, "lam": 0.95, "epochs": 2, "minibatch": 16, "clip": 0.2, "likelihood": "flow",
            "flow_draws": 4, "push_away": True, "ratio": "element", "vf_coef": 0.5, "max_grad_norm": 1.0,
            "target_kl": 0.02, "lr": 3e-07, "critic_lr": 0.0003, "critic_warmup": 1, "ema": 0.0},
    "noise": {"sigma_start": 0.2, "sigma_end": 0.002, "learn_sigma": False, "sigma_lr": 0.003},
    "start": {"steer": True, "initial_spread": 0.5, "spread_lr": 0.0, "spread_head_lr": 0.0, "spread_noise": 0.0},
    "filtered": {"fit_lr": 0.0001, "fit_epochs": 8, "fit_minibatch": 32, "fit_warmup": 20, "fit_threads": 2,
                 "rollout_spread": 1.0, "anchor": 0.25},
}


def _args(rl: dict) -> dict:
    return {"rl": rl, "reward": {}, "env": {}}


def test_the_main_job_of_before_reads_as_todays_main_profile():
    assert current_layout(MAIN_JOB_BEFORE) == RL_PROFILES["main"].config().as_dict()
    today = RL_PROFILES["main"].config().as_dict()
    assert current_layout(today) is today
    assert run_defining(_args(MAIN_JOB_BEFORE)) == run_defining(_args({**today, "run": {**today["run"],
                                                                                       "iterations": 50}}))


def test_an_old_ppo_run_on_the_chain_reads_with_its_noise_and_spread_settings():
    old = {**MAIN_JOB_BEFORE, "algorithm": "ppo", "ppo": {**MAIN_JOB_BEFORE["ppo"], "likelihood": "chain"},
           "start": {"steer": True, "initial_spread": 1.0, "spread_lr": 1e-2, "spread_head_lr": 1e-4,
                     "spread_noise": 0.3},
           "run": {**MAIN_JOB_BEFORE["run"], "chain_dtype": "float32"}}
    expected = replace_fields(RL_PROFILES["main"], algorithm="ppo", initial_spread=1.0, spread_lr=1e-2,
                              spread_noise=0.3).config().as_dict()
    assert current_layout(old) == expected


@pytest.mark.parametrize("change, named", [
    ({"algorithm": "ppo"}, "PPO on the flow surrogate"),
    ({"ppo": {**MAIN_JOB_BEFORE["ppo"], "ratio": "chunk"}}, "ratio chunk"),
    ({"noise": {**MAIN_JOB_BEFORE["noise"], "learn_sigma": True}}, "learned noise sizes"),
    ({"filtered": {**MAIN_JOB_BEFORE["filtered"], "rollout_spread": 0.5}}, "rollout spread 0.5")])
def test_a_run_that_used_a_setting_that_left_is_refused_in_one_line_naming_the_commit(change, named):
    with pytest.raises(RunError) as refused:
        current_layout({**MAIN_JOB_BEFORE, **change})
    message = str(refused.value)
    assert named in message and LAST_COMMIT in message and "\n" not in message
