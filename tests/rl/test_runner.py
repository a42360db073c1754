"""The RL runner: best/last checkpoints and ties, resume without lost or repeated iterations (also of a run whose
`args.json` commit 0b5ba4f wrote, and the one-line refusal of an old run that used a setting that left the core), a
killed worker, the CLI smoke runs, each algorithm through the runner, and ratio 1 for the tiny SmolVLA."""

import json
import math
import shutil
from dataclasses import asdict, replace

import pytest
import torch

import chess_sim.rl.algorithms.filtered as filtered_module
import chess_sim.rl.runner as rl_runner
from chess_sim.cli import main
from chess_sim.config import (RL_PROFILES, CameraConfig, FilteredConfig, PPOConfig, RLConfig, profile,
                              replace_fields)
from chess_sim.policy.base import noise_schedule
from chess_sim.policy.compact import CompactPolicy
from chess_sim.policy.loading import load_policy
from chess_sim.policy.start import SteeredPolicy
from chess_sim.rl.algorithms.filtered import SuccessFiltered
from chess_sim.rl.algorithms.reinflow_ppo import ReinFlowPPO
from chess_sim.rl.runner import run
from chess_sim.runs import RunError

pytestmark = pytest.mark.slow  # whole RL runs over worker processes

ENV = replace(profile("baseline"), episode_seconds=2.0, camera=CameraConfig(64, 64))
# training scenes on which the tiny policy's 2 s episodes outlast their first decision (not all do: they end early
# once a failure is settled), so that executing part of each chunk shows in the count of decisions
CFG = replace_fields(RLConfig(), iterations=3, episodes=2, envs=2, val_episodes=2, val_every=1, save_every=2,
                     minibatch=4, epochs=1, lr=1e-4, critic_warmup=1, torch_threads=1, train_seed=7_700_003)
SPREAD_KEYS = ("spread_kl", "spread_clipfrac")
"""PPO's update statistics that only spread exploration logs."""


@pytest.fixture(scope="module")
def policy_dir(tiny_policy_dir):
    return tiny_policy_dir


def lines(out):
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def as_0b5ba4f_wrote_it(rl: dict, **ppo_changes) -> dict:
    """A PPO run's `rl` tree of `args.json` (`RLConfig.as_dict`) as commit 0b5ba4f wrote the same run's, and from
    before the sampler settings existed (no `denoise_steps`, `time_power`, `policy_in_simulators`); `ppo_changes`
    alter its `ppo` section."""
    ppo = dict(rl["ppo"])
    noise = {"sigma_start": ppo.pop("sigma_start"), "sigma_end": ppo.pop("sigma_end"), "learn_sigma": False,
             "sigma_lr": 3e-3}
    spread = {name: ppo.pop(name) for name in ("spread_lr", "spread_head_lr", "spread_noise")}
    run_section = {name: value for name, value in rl["run"].items()
                   if name not in ("denoise_steps", "time_power", "policy_in_simulators")}
    filtered = {name: value for name, value in asdict(FilteredConfig()).items()
                if name not in ("fit_draws", "chain_dtype")}
    return {"algorithm": "ppo", "run": {**run_section, "chain_dtype": "float32"},
            "ppo": {**ppo, "likelihood": "chain", "flow_draws": 4, "ratio": "element", **rl["optim"], **ppo_changes},
            "noise": noise, "start": {**rl["start"], **spread}, "filtered": {**filtered, "rollout_spread": 1.0}}


def rewrite_as_0b5ba4f(out, **ppo_changes) -> None:
    """The run in `out` made to look begun by commit 0b5ba4f: its `args.json` in that layout, and its state with the
    noise sizes that commit kept there."""
    args = json.loads((out / "args.json").read_text())
    (out / "args.json").write_text(json.dumps({**args, "rl": as_0b5ba4f_wrote_it(args["rl"], **ppo_changes)}))
    state_path = out / "last" / "rl_state.pt"
    state = torch.load(state_path, weights_only=True)
    state["log_sigma"] = noise_schedule(0.2, 0.002, 3).log()[:, None].expand(3, 6).clone()
    torch.save(state, state_path)


@pytest.fixture(scope="module")
def full_run(policy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rl") / "run"
    run(policy_dir, out, CFG, ENV)
    return out


def test_a_run_logs_every_iteration_and_writes_its_checkpoints(full_run):
    log = lines(full_run)
    assert [line["iteration"] for line in log] == [0, 1, 2, 3]
    ppo_keys = [key for key in ReinFlowPPO.log_keys if key not in SPREAD_KEYS]
    for key in (*rl_runner.ITERATION_KEYS, *ppo_keys, "train_success", "val_success", "val_seconds"):
        assert key in log[1]
    assert not set(SPREAD_KEYS) & set(log[1])  # no spread exploration, no statistics of it
    assert set(log[1]["rollout_parts"]) == {"prep", "sample", "policy", "physics", "render", "resets", "env", "rounds"}
    assert "approx_kl" not in log[1]  # the seed's name for it: kl
    assert json.loads((full_run / "args.json").read_text())["rl"] == CFG.as_dict()
    for name in ("last", "best", "iter_0002"):
        assert (full_run / name / "model.safetensors").is_file() and (full_run / name / "rl_state.pt").is_file()
    assert json.loads((full_run / "check.json").read_text())["passed"]
    assert (full_run / "val" / "iter_0003" / "episodes.csv").is_file()
    assert torch.load(full_run / "last" / "rl_state.pt", weights_only=True)["next_index"] == 3 * CFG.run.episodes


def test_a_run_executing_part_of_each_chunk_decides_more_often_and_saves_its_policies_so(policy_dir, full_run,
                                                                                         tmp_path):
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=1, action_steps=10), ENV)
    for name in ("last", "best"):
        assert CompactPolicy.load(tmp_path / "run" / name).action_steps == 10
    assert CompactPolicy.load(policy_dir).action_steps == 50
    # the same scenes and draws: 2 s episodes take 2 decisions of 50 actions, or up to 6 of 10
    assert lines(tmp_path / "run")[1]["decisions"] > lines(full_run)[1]["decisions"]


def test_a_run_on_another_time_grid_samples_checks_and_saves_its_policies_so(policy_dir, tmp_path):
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=1, denoise_steps=3, time_power=2), ENV)
    assert json.loads((tmp_path / "run" / "check.json").read_text())["passed"]  # log-probs re-evaluated on the grid
    for name in ("last", "best"):
        saved = CompactPolicy.load(tmp_path / "run" / name)
        assert (saved.steps, saved.time_power) == (3, 2)


def test_critic_warmup_iteration_leaves_the_policy_as_it_was_and_trains_the_critic(policy_dir, full_run, tmp_path,
                                                                                   monkeypatch):
    start = CompactPolicy.load(policy_dir).state_dict()
    monkeypatch.setattr(rl_runner, "_validate", lambda *args: {"val_success": 0.0})
    cfg = replace_fields(CFG, iterations=1)
    run(policy_dir, tmp_path / "run", cfg, ENV)
    warmed = CompactPolicy.load(tmp_path / "run" / "last").state_dict()
    assert all(torch.equal(start[k], warmed[k]) for k in start)
    critic = torch.load(tmp_path / "run" / "last" / "rl_state.pt", weights_only=True)["critic"]
    initial = rl_runner.build(policy_dir, cfg).model.critic.state_dict()
    assert any(not torch.equal(initial[k], critic[k]) for k in critic)  # the warm-up trained the critic alone
    # the chain's noise sizes are the configured ones (sigma_start 0.2 to sigma_end 0.002 over the tiny policy's 3)
    assert lines(tmp_path / "run")[1]["sigma_mean"] == pytest.approx(float(noise_schedule(0.2, 0.002, 3).mean()))
    updated = CompactPolicy.load(full_run / "last").state_dict()
    assert any(not torch.equal(start[k], updated[k]) for k in start)  # the iterations after the warm-up moved it


def test_resume_continues_exactly_where_an_uninterrupted_run_is(policy_dir, full_run, tmp_path):
    out = tmp_path / "run"
    run(policy_dir, out, replace_fields(CFG, iterations=2), ENV)
    with pytest.raises(RunError, match="other settings"):
        run(policy_dir, out, replace_fields(CFG, lr=1.0), ENV, resume=True)
    run(policy_dir, out, CFG, ENV, resume=True)
    resumed, uninterrupted = lines(out), lines(full_run)
    assert [line["iteration"] for line in resumed] == [0, 1, 2, 3]
    for key in ("decisions", "pg_loss", "v_loss", "kl", "train_success", "val_success"):
        assert resumed[3][key] == uninterrupted[3][key]
    a, b = CompactPolicy.load(out / "last").state_dict(), CompactPolicy.load(full_run / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_begun_by_an_older_chess_sim_resumes_exactly_where_an_uninterrupted_run_is(policy_dir, full_run,
                                                                                         tmp_path):
    out = tmp_path / "run"
    run(policy_dir, out, replace_fields(CFG, iterations=2), ENV)
    rewrite_as_0b5ba4f(out)
    with pytest.raises(RunError, match="other settings"):  # the old layout is read as today's, then compared
        run(policy_dir, out, replace_fields(CFG, lr=1.0), ENV, resume=True)
    run(policy_dir, out, CFG, ENV, resume=True)
    resumed, uninterrupted = lines(out), lines(full_run)
    assert [line["iteration"] for line in resumed] == [0, 1, 2, 3]
    for key in ("decisions", "pg_loss", "v_loss", "kl", "train_success", "val_success"):
        assert resumed[3][key] == uninterrupted[3][key]
    a, b = CompactPolicy.load(out / "last").state_dict(), CompactPolicy.load(full_run / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_an_old_run_of_ppo_on_the_flow_surrogate_is_refused_in_one_line_naming_the_commit_that_resumes_it(
        policy_dir, full_run, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(full_run / "args.json", out / "args.json")
    shutil.copytree(full_run / "last", out / "last")
    rewrite_as_0b5ba4f(out, likelihood="flow")
    args, state = (out / "args.json").read_bytes(), (out / "last" / "rl_state.pt").read_bytes()
    with pytest.raises(RunError) as refused:
        run(policy_dir, out, CFG, ENV, resume=True)
    message = str(refused.value)
    assert "PPO on the flow surrogate" in message and "0b5ba4f" in message and "\n" not in message
    assert main(["rl", "--policy", str(policy_dir), "--out", str(out), "--profile", "smolvla", "--resume"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("chess-sim: error:") and "0b5ba4f" in errors[0]
    assert (out / "args.json").read_bytes() == args and (out / "last" / "rl_state.pt").read_bytes() == state
    assert not (out / "log.jsonl").exists()  # nothing ran


def test_a_weight_average_is_what_the_run_validates_saves_and_resumes(policy_dir, tmp_path, monkeypatch):
    import chess_sim.eval

    cfg = replace_fields(CFG, ema=0.5)
    validated, original = [], chess_sim.eval.validate

    def recording(policy, *args, **kwargs):
        validated.append({k: v.clone() for k, v in policy.state_dict().items()})
        return original(policy, *args, **kwargs)

    monkeypatch.setattr(chess_sim.eval, "validate", recording)
    run(policy_dir, tmp_path / "full", cfg, ENV)
    saved = CompactPolicy.load(tmp_path / "full" / "last").state_dict()
    live = torch.load(tmp_path / "full" / "last" / "rl_state.pt", weights_only=True)["live_policy"]
    assert all(torch.equal(validated[-1][k], saved[k]) for k in saved)
    assert any(not torch.equal(saved[k], live[k]) for k in live)  # the average is saved, not the live weights
    out = tmp_path / "run"
    run(policy_dir, out, replace_fields(cfg, iterations=2), ENV)
    run(policy_dir, out, cfg, ENV, resume=True)
    resumed = CompactPolicy.load(out / "last").state_dict()
    resumed_live = torch.load(out / "last" / "rl_state.pt", weights_only=True)["live_policy"]
    assert all(torch.equal(resumed[k], saved[k]) for k in saved)
    assert all(torch.equal(resumed_live[k], live[k]) for k in live)


def test_best_is_the_latest_of_tied_validations(policy_dir, tmp_path, monkeypatch):
    successes = iter([0.5, 0.0, 0.5, 0.25])
    monkeypatch.setattr(rl_runner, "_validate", lambda *args: {"val_success": next(successes)})
    run(policy_dir, tmp_path / "run", CFG, ENV)
    assert torch.load(tmp_path / "run" / "best" / "rl_state.pt", weights_only=True)["iteration"] == 2


@pytest.mark.parametrize("in_simulators", [False, True])
def test_a_worker_killed_mid_rollout_is_survived(policy_dir, tmp_path, monkeypatch, kill_worker_at_step,
                                                 in_simulators):
    from chess_sim.sim.vec_env import VecChessEnv

    kill_worker_at_step(VecChessEnv, 1)
    monkeypatch.setattr(rl_runner, "_validate", lambda *args: {"val_success": 0.0})
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=1, policy_in_simulators=in_simulators), ENV)
    log = lines(tmp_path / "run")
    assert log[-1]["iteration"] == 1 and log[-1]["restarts"] >= 1 and log[-1]["train_episodes"] == CFG.run.episodes


def test_cli_smoke_rl_and_rl_check(policy_dir, tmp_path, capsys):
    tiny = ["--episodes", "1", "--envs", "1", "--val-episodes", "1", "--fit-minibatch", "2", "--torch-threads", "1"]
    assert main(["rl-check", "--policy", str(policy_dir), "--out", str(tmp_path / "check"), *tiny]) == 0
    assert "PASSED" in (tmp_path / "check" / "check.md").read_text()
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "rl"), "--iterations", "1", *tiny,
                 "--json", str(tmp_path / "rl.json")]) == 0
    assert json.loads((tmp_path / "rl.json").read_text())["iteration"] == 1
    printed = capsys.readouterr().out
    assert "RL profile: compact, algorithm filtered" in printed and "iteration 1 " in printed
    assert "validation" in printed
    assert '"iteration"' not in printed  # the full lines are in log.jsonl (and on the terminal with --verbose)
    assert main(["rl", "--policy", str(tmp_path / "none"), "--out", str(tmp_path / "x")]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--algorithm", "token"]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--iterations", "0"]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--profile", "smolvla",
                 "--spread-noise", "0.3"]) == 2  # spread exploration without a learned start
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--algorithm", "ppo",
                 "--chain-dtype", "float32"]) == 2  # a setting of the other algorithm
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "rl"), *tiny]) == 2  # not empty
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 6 and all(line.startswith("chess-sim: error:") for line in errors)
    assert "invalid choice" in errors[1] and "--iterations must be >= 1" in errors[2]
    assert "--spread-noise" in errors[3] and "--steer" in errors[3]
    assert "--chain-dtype is a setting of --algorithm filtered" in errors[4] and "algorithm is ppo" in errors[4]
    assert not (tmp_path / "y").exists()


def test_the_profile_is_printed_and_saved_and_every_flag_negates(policy_dir, tmp_path, capsys, monkeypatch):
    seen = {}
    monkeypatch.setattr(rl_runner, "run", lambda *args, **kwargs: seen.update(cfg=args[2], **kwargs) or {})
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "a"), "--no-steer"]) == 0
    assert "RL profile: compact, algorithm filtered" in capsys.readouterr().out
    assert seen["profile_name"] == "compact" and not seen["cfg"].start.steer and seen["cfg"].run.envs == 16
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "b"), "--profile", "smolvla", "--steer",
                 "--no-push-away", "--no-tensorboard"]) == 0
    assert seen["profile_name"] == "smolvla" and seen["cfg"].start.steer and not seen["cfg"].algorithm.push_away
    assert "note: the smolvla profile is sized for SmolVLA on a GPU; this policy is compact" in capsys.readouterr().out
    # choosing an algorithm brings its own defaults, the profile's run and start settings stay
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "c"), "--algorithm", "ppo"]) == 0
    assert "RL profile: compact, algorithm ppo" in capsys.readouterr().out
    assert seen["cfg"].algorithm == PPOConfig() and seen["cfg"].start.steer and seen["cfg"].run.envs == 16
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "d"), "--profile", "main"]) == 0
    assert seen["profile_name"] == "main" and seen["cfg"] == RL_PROFILES["main"].config()


def test_tiny_smolvla_ratio_is_one_before_an_update(tmp_path):
    from chess_sim.policy.smolvla_build import build_tiny_smolvla

    policy = build_tiny_smolvla(tmp_path / "tiny").eval()
    algorithm = ReinFlowPPO(policy, RLConfig())
    model = algorithm.model
    assert model.prefix_dtype == torch.bfloat16  # SmolVLA's prefix is stored in bfloat16
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 64, 64, generator=generator)
    batch = {"observation.images.front": images, "observation.images.wrist": images.flip(0),
             "observation.state": torch.randn(2, 6, generator=generator),
             "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."]}
    x0 = torch.randn(2, 50, policy.chain_dim, generator=generator)
    noise = torch.randn(2, policy.steps, 50, policy.chain_dim, generator=generator)
    sample = model.sample(batch, x0, noise, None, algorithm.rollout_spec())
    with torch.no_grad():
        log_probs = model.evaluate(sample.chain, sample.prefix, algorithm.sigmas)
    assert sample.log_probs.shape == (2, policy.steps, 50, policy.chain_dim) and policy.chain_dim > 6
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3
    # The padded dimensions are scored too: each transition moved them by sigma_k times its draw.
    padded = -0.5 * noise[..., 6:] ** 2 - algorithm.sigmas.log()[None, :, None, 6:] - 0.5 * math.log(2 * math.pi)
    assert torch.allclose(sample.log_probs[..., 6:], padded, atol=1e-3)
    steered = ReinFlowPPO(policy, replace_fields(RLConfig(), steer=True))
    sample = steered.model.sample(batch, x0, noise, None, steered.rollout_spec())
    with torch.no_grad():
        log_probs = steered.model.evaluate(sample.chain, sample.prefix, steered.sigmas)
    assert sample.log_probs.shape == (2, policy.steps + 1, 50, policy.chain_dim)  # the start counts too: any FlowPolicy steers
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3


def test_a_time_budget_ends_the_run_with_a_validated_iteration(policy_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(rl_runner, "_validate", lambda *args: {"val_success": 0.0})
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=3, val_every=5, minutes=1e-6), ENV)
    log = lines(tmp_path / "run")
    assert [line["iteration"] for line in log] == [0, 1] and "val_success" in log[1]


def test_a_run_interrupted_mid_update_resumes_to_the_uninterrupted_result(policy_dir, full_run, tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "run"
    original, calls = ReinFlowPPO.update, []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            original(self, *args, **kwargs)  # weights and optimizer move, then Ctrl-C before the iteration ends
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ReinFlowPPO, "update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(policy_dir, out, CFG, ENV)
    monkeypatch.setattr(ReinFlowPPO, "update", original)
    assert [line["iteration"] for line in lines(out)] == [0, 1]
    run(policy_dir, out, CFG, ENV, resume=True)
    assert [line["iteration"] for line in lines(out)] == [0, 1, 2, 3]
    a, b = CompactPolicy.load(out / "last").state_dict(), CompactPolicy.load(full_run / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    resumed = torch.load(out / "last" / "rl_state.pt", weights_only=True)
    uninterrupted = torch.load(full_run / "last" / "rl_state.pt", weights_only=True)
    assert resumed["next_index"] == uninterrupted["next_index"]
    assert all(torch.equal(resumed["critic"][k], uninterrupted["critic"][k]) for k in uninterrupted["critic"])
    for group_a, group_b in zip(resumed["optimizer"]["state"].values(), uninterrupted["optimizer"]["state"].values()):
        assert torch.equal(group_a["exp_avg"], group_b["exp_avg"])


def test_a_steered_run_keeps_the_chain_explores_the_spread_and_saves_a_steered_policy(policy_dir, tmp_path):
    out = tmp_path / "run"
    cfg = replace_fields(CFG, iterations=2, val_every=2, steer=True, lr=0.0, spread_noise=0.3, spread_lr=1e-2,
                         spread_head_lr=1e-3)
    run(policy_dir, out, cfg, ENV)
    log = lines(out)
    assert [line["iteration"] for line in log] == [0, 1, 2]
    low, median, high = log[2]["start_std_scene"]
    assert low < high and log[2]["start_std"] != 1.0 and all(key in log[2] for key in SPREAD_KEYS)
    start, last = CompactPolicy.load(policy_dir).state_dict(), load_policy(out / "last")
    assert isinstance(last, SteeredPolicy)
    assert all(torch.equal(start[k], last.base.state_dict()[k]) for k in start)  # the chain's lr is 0
    assert last.start.head[-1].weight.any()  # the head learned in the one update after the critic warm-up
    assert not torch.equal(last.start.log_std, torch.zeros(1))


def filtered_cfg(iterations: int, **fields) -> RLConfig:
    """`CFG`'s run under success-filtered flow matching with `fields` of its config."""
    return replace(CFG, run=replace(CFG.run, iterations=iterations), algorithm=FilteredConfig(**fields))


def test_a_filtered_run_fits_its_successes_saves_the_policy_at_its_own_spread_and_resumes(policy_dir, tmp_path,
                                                                                          monkeypatch):
    fitted = []

    def every_decision(storage, rows):  # the tiny policy solves nothing: fit all of its decisions instead
        fitted.append(len(storage))
        return list(range(len(storage))), dict.fromkeys(range(len(storage)), 1.0)

    monkeypatch.setattr(filtered_module, "weighted_decisions", every_decision)
    cfg = replace_fields(filtered_cfg(2, fit_epochs=2, fit_minibatch=2, fit_warmup=1), steer=True,
                         initial_spread=0.5)
    out = tmp_path / "run"
    run(policy_dir, out, cfg, ENV)
    log = lines(out)
    assert [line["iteration"] for line in log] == [0, 1, 2]
    for key in SuccessFiltered.log_keys:
        assert key in log[1]
    assert "kl" not in log[1] and "sigma_mean" not in log[1] and fitted == [log[1]["decisions"], log[2]["decisions"]]
    assert log[1]["fit_steps"] == 2 * -(-log[1]["decisions"] // 2)
    rl_args = json.loads((out / "args.json").read_text())["rl"]
    assert rl_args["algorithm"] == "filtered" and "ppo" not in rl_args and rl_args == cfg.as_dict()
    state = torch.load(out / "last" / "rl_state.pt", weights_only=True)
    assert [group["name"] for group in state["optimizer"]["param_groups"]] == ["chain"] and "critic" not in state
    start, last = CompactPolicy.load(policy_dir).state_dict(), load_policy(out / "last")
    assert isinstance(last, SteeredPolicy) and float(last.start.std().detach()) == pytest.approx(0.5)
    assert not all(torch.equal(start[k], last.base.state_dict()[k]) for k in start)  # the velocity learned
    assert json.loads((out / "check.json").read_text())["passed"]
    resumed = tmp_path / "resumed"
    run(policy_dir, resumed, replace_fields(cfg, iterations=1), ENV)
    run(policy_dir, resumed, cfg, ENV, resume=True)
    assert lines(resumed)[2]["fit_loss_last_epoch"] == log[2]["fit_loss_last_epoch"]
    again = load_policy(resumed / "last")
    assert all(torch.equal(again.state_dict()[k], last.state_dict()[k]) for k in last.state_dict())


def test_an_anchored_run_fits_against_its_start_policy_also_after_a_resume(policy_dir, tmp_path, monkeypatch):
    anchors, sittings = [], []
    real_errors = filtered_module.chunk_errors

    def recording(policy, chain, prefix, noise, times, anchor=None):
        anchors.append(anchor)
        return real_errors(policy, chain, prefix, noise, times, anchor)

    monkeypatch.setattr(filtered_module, "chunk_errors", recording)
    monkeypatch.setattr(filtered_module, "weighted_decisions",
                        lambda storage, rows: (list(range(len(storage))), dict.fromkeys(range(len(storage)), 1.0)))
    cfg = filtered_cfg(1, fit_epochs=1, fit_minibatch=4, anchor=1.0)
    start_dir, out = tmp_path / "start", tmp_path / "run"
    shutil.copytree(policy_dir, start_dir)
    run(start_dir, out, cfg, ENV)
    sittings.append(len(anchors))
    run(tmp_path / "elsewhere", out, replace_fields(cfg, iterations=2), ENV, resume=True)
    assert 0 < sittings[0] < len(anchors)  # both sittings fitted, every step against an anchor of weight 1
    assert all(anchor is not None and anchor[1] == 1.0 for anchor in anchors)
    references = [anchors[0][0], anchors[-1][0]]
    assert references[0] is not references[1]  # the resume loaded its own
    start = CompactPolicy.load(start_dir).state_dict()
    assert all(not reference.training for reference in references)
    for reference in references:  # the policy the run began from, not `last/` nor the directory given to the resume
        assert all(torch.equal(start[k], reference.state_dict()[k]) for k in start)
    assert all(anchor[0] is references[0] for anchor in anchors[:sittings[0]])
    assert all(anchor[0] is references[1] for anchor in anchors[sittings[0]:])
    assert not all(torch.equal(start[k], load_policy(out / "last").state_dict()[k]) for k in start)
    shutil.rmtree(start_dir)
    with pytest.raises(rl_runner.RLError, match="start policy"):
        run(start_dir, out, replace_fields(cfg, iterations=3), ENV, resume=True)


def test_a_policy_with_nan_actions_stops_rl_in_one_line_naming_the_scene(tmp_path, capsys):
    from chess_sim.config import CompactConfig
    from chess_sim.policy.base import Normalizer
    from chess_sim.policy.compact import CompactPolicy

    normalizer = Normalizer.identity()
    normalizer.action_std = torch.full((6,), float("nan"))
    CompactPolicy(CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=3), normalizer).save(tmp_path / "p")
    tiny = ["--episodes", "1", "--envs", "1", "--val-episodes", "1", "--fit-minibatch", "2", "--torch-threads", "1"]
    assert main(["rl", "--policy", str(tmp_path / "p"), "--out", str(tmp_path / "rl"), "--iterations", "1",
                 *tiny]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1 and "training scene 0" in errors[0] and "decision 1" in errors[0], errors
    assert "NaN or inf" in errors[0] and (tmp_path / "rl" / "last").is_dir()  # iteration 0's checkpoint stays
