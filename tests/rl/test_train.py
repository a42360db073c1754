"""The RL loop: best/last checkpoints and ties, resume without lost or repeated iterations, a killed worker,
the CLI smoke runs, and ratio 1 for the tiny SmolVLA."""

import json
import math
import shutil
from dataclasses import replace

import pytest
import torch

import chess_sim.rl.train as rl_train
from chess_sim.cli import main
from chess_sim.config import CameraConfig, RLConfig, StartConfig, profile, replace_fields
from chess_sim.policy.compact import CompactPolicy
from chess_sim.policy.loading import load_policy
from chess_sim.policy.start import SteeredPolicy
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.rl.train import run
from chess_sim.runs import RunError

pytestmark = pytest.mark.slow  # whole RL runs over worker processes

ENV = replace(profile("baseline"), episode_seconds=2.0, camera=CameraConfig(64, 64))
# training scenes on which the tiny policy's 2 s episodes outlast their first decision (not all do: they end early
# once a failure is settled), so that executing part of each chunk shows in the count of decisions
CFG = replace_fields(RLConfig(), iterations=3, episodes=2, envs=2, val_episodes=2, val_every=1, save_every=2,
                     minibatch=4, epochs=1, lr=1e-4, critic_warmup=1, torch_threads=1, train_seed=7_700_003)


@pytest.fixture(scope="module")
def policy_dir(tiny_policy_dir):
    return tiny_policy_dir


def lines(out):
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def full_run(policy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rl") / "run"
    run(policy_dir, out, CFG, ENV)
    return out


def test_a_run_logs_every_iteration_and_writes_its_checkpoints(full_run):
    log = lines(full_run)
    assert [line["iteration"] for line in log] == [0, 1, 2, 3]
    for key in (*rl_train.ITERATION_KEYS, *rl_train.UPDATE_KEYS["ppo"], "train_success", "val_success", "val_seconds"):
        assert key in log[1]
    assert set(log[1]["rollout_parts"]) == {"prep", "sample", "policy", "physics", "render", "resets", "env", "rounds"}
    assert "kl" not in log[1]  # one name per statistic: approx_kl
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


def test_the_optimizer_trains_a_learned_noise_size(policy_dir):
    model, optimizer = rl_train.build(policy_dir, replace_fields(CFG, learn_sigma=True, sigma_lr=0.5))
    group = next(g for g in optimizer.param_groups if any(p is model.log_sigma for p in g["params"]))
    assert group["lr"] == 0.5


def test_critic_warmup_iteration_leaves_the_policy_as_it_was(policy_dir, full_run, tmp_path, monkeypatch):
    start = CompactPolicy.load(policy_dir).state_dict()
    monkeypatch.setattr(rl_train, "_validate", lambda *args: {"val_success": 0.0})
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=1, learn_sigma=True), ENV)
    warmed = CompactPolicy.load(tmp_path / "run" / "last").state_dict()
    assert all(torch.equal(start[k], warmed[k]) for k in start)
    state = torch.load(tmp_path / "run" / "last" / "rl_state.pt", weights_only=True)
    assert torch.allclose(state["log_sigma"].exp()[0], torch.tensor(0.2))
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
    for key in ("decisions", "pg_loss", "v_loss", "approx_kl", "train_success", "val_success"):
        assert resumed[3][key] == uninterrupted[3][key]
    a, b = CompactPolicy.load(out / "last").state_dict(), CompactPolicy.load(full_run / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_begun_before_the_sampler_settings_existed_still_resumes(policy_dir, tmp_path):
    out = tmp_path / "run"
    run(policy_dir, out, replace_fields(CFG, iterations=1), ENV)
    args = json.loads((out / "args.json").read_text())
    for name in ("denoise_steps", "time_power", "policy_in_simulators", "chain_dtype"):
        del args["rl"]["run"][name]
    (out / "args.json").write_text(json.dumps(args))
    run(policy_dir, out, replace_fields(CFG, iterations=2), ENV, resume=True)
    assert [line["iteration"] for line in lines(out)] == [0, 1, 2]


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
    monkeypatch.setattr(rl_train, "_validate", lambda *args: {"val_success": next(successes)})
    run(policy_dir, tmp_path / "run", CFG, ENV)
    assert torch.load(tmp_path / "run" / "best" / "rl_state.pt", weights_only=True)["iteration"] == 2


@pytest.mark.parametrize("in_simulators", [False, True])
def test_a_worker_killed_mid_rollout_is_survived(policy_dir, tmp_path, monkeypatch, kill_worker_at_step,
                                                 in_simulators):
    from chess_sim.sim.vec_env import VecChessEnv

    kill_worker_at_step(VecChessEnv, 1)
    monkeypatch.setattr(rl_train, "_validate", lambda *args: {"val_success": 0.0})
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=1, policy_in_simulators=in_simulators), ENV)
    log = lines(tmp_path / "run")
    assert log[-1]["iteration"] == 1 and log[-1]["restarts"] >= 1 and log[-1]["train_episodes"] == CFG.run.episodes


def test_cli_smoke_rl_and_rl_check(policy_dir, tmp_path, capsys):
    tiny = ["--episodes", "1", "--envs", "1", "--val-episodes", "1", "--minibatch", "2", "--torch-threads", "1"]
    assert main(["rl-check", "--policy", str(policy_dir), "--out", str(tmp_path / "check"), *tiny]) == 0
    assert "PASSED" in (tmp_path / "check" / "check.md").read_text()
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "rl"), "--iterations", "1", *tiny,
                 "--json", str(tmp_path / "rl.json")]) == 0
    assert json.loads((tmp_path / "rl.json").read_text())["iteration"] == 1
    printed = capsys.readouterr().out
    assert "RL profile: compact" in printed and "iteration 1 " in printed and "validation" in printed
    assert '"iteration"' not in printed  # the full lines are in log.jsonl (and on the terminal with --verbose)
    assert main(["rl", "--policy", str(tmp_path / "none"), "--out", str(tmp_path / "x")]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--ratio", "token"]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--iterations", "0"]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--profile", "smolvla",
                 "--spread-noise", "0.3"]) == 2  # spread exploration without a learned start
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "y"), "--algorithm", "ppo"]) == 2
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "rl"), *tiny]) == 2  # not empty
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 6 and all(line.startswith("chess-sim: error:") for line in errors)
    assert "--iterations must be >= 1" in errors[2] and "--spread-noise" in errors[3] and "--steer" in errors[3]
    assert "--chain-dtype float32" in errors[4]  # the compact profile's bfloat16 rollouts, under ppo


def test_the_profile_is_printed_and_saved_and_every_flag_negates(policy_dir, tmp_path, capsys, monkeypatch):
    seen = {}
    monkeypatch.setattr(rl_train, "run", lambda *args, **kwargs: seen.update(cfg=args[2], **kwargs) or {})
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "a"), "--no-steer"]) == 0
    assert "RL profile: compact" in capsys.readouterr().out
    assert seen["profile_name"] == "compact" and not seen["cfg"].start.steer and seen["cfg"].run.envs == 16
    assert main(["rl", "--policy", str(policy_dir), "--out", str(tmp_path / "b"), "--profile", "smolvla", "--steer",
                 "--learn-sigma", "--no-tensorboard"]) == 0
    assert seen["profile_name"] == "smolvla" and seen["cfg"].start.steer and seen["cfg"].noise.learn_sigma


def test_tiny_smolvla_ratio_is_one_before_an_update(tmp_path):
    from chess_sim.policy.smolvla_build import build_tiny_smolvla

    policy = build_tiny_smolvla(tmp_path / "tiny").eval()
    model = FlowRL(policy, prefix_dtype=torch.bfloat16).eval()
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 64, 64, generator=generator)
    batch = {"observation.images.front": images, "observation.images.wrist": images.flip(0),
             "observation.state": torch.randn(2, 6, generator=generator),
             "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."]}
    x0 = torch.randn(2, 50, policy.chain_dim, generator=generator)
    noise = torch.randn(2, policy.steps, 50, policy.chain_dim, generator=generator)
    sample = model.sample(batch, x0, noise)
    with torch.no_grad():
        log_probs, _ = model.evaluate(sample.chain, sample.prefix, batch["observation.state"])
    assert sample.log_probs.shape == (2, policy.steps, 50, policy.chain_dim) and policy.chain_dim > 6
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3
    # The padded dimensions are scored too: each transition moved them by sigma_k times its draw.
    padded = -0.5 * noise[..., 6:] ** 2 - model.sigmas().log()[None, :, None, 6:] - 0.5 * math.log(2 * math.pi)
    assert torch.allclose(sample.log_probs[..., 6:], padded, atol=1e-3)
    steered = FlowRL(policy, start=StartConfig(steer=True), prefix_dtype=torch.bfloat16).eval()
    sample = steered.sample(batch, x0, noise)
    with torch.no_grad():
        log_probs, _ = steered.evaluate(sample.chain, sample.prefix, batch["observation.state"])
    assert sample.log_probs.shape == (2, policy.steps + 1, 50, policy.chain_dim)  # the start counts too: any FlowPolicy steers
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3


def test_a_time_budget_ends_the_run_with_a_validated_iteration(policy_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(rl_train, "_validate", lambda *args: {"val_success": 0.0})
    run(policy_dir, tmp_path / "run", replace_fields(CFG, iterations=3, val_every=5, minutes=1e-6), ENV)
    log = lines(tmp_path / "run")
    assert [line["iteration"] for line in log] == [0, 1] and "val_success" in log[1]


def test_a_run_interrupted_mid_update_resumes_to_the_uninterrupted_result(policy_dir, full_run, tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "run"
    original, calls = rl_train.ppo_update, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            original(*args, **kwargs)  # weights and optimizer move, then Ctrl-C before the iteration ends
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(rl_train, "ppo_update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(policy_dir, out, CFG, ENV)
    monkeypatch.setattr(rl_train, "ppo_update", original)
    assert [line["iteration"] for line in lines(out)] == [0, 1]
    run(policy_dir, out, CFG, ENV, resume=True)
    assert [line["iteration"] for line in lines(out)] == [0, 1, 2, 3]
    a, b = CompactPolicy.load(out / "last").state_dict(), CompactPolicy.load(full_run / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    resumed = torch.load(out / "last" / "rl_state.pt", weights_only=True)
    uninterrupted = torch.load(full_run / "last" / "rl_state.pt", weights_only=True)
    assert resumed["next_index"] == uninterrupted["next_index"]
    assert torch.equal(resumed["log_sigma"], uninterrupted["log_sigma"])
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
    assert low < high and log[2]["start_std"] != 1.0 and "spread_clipfrac" in log[2]
    start, last = CompactPolicy.load(policy_dir).state_dict(), load_policy(out / "last")
    assert isinstance(last, SteeredPolicy)
    assert all(torch.equal(start[k], last.base.state_dict()[k]) for k in start)  # the chain's lr is 0
    assert last.start.head[-1].weight.any()  # the head learned in the one update after the critic warm-up
    assert not torch.equal(last.start.log_std, torch.zeros(1))


def test_a_filtered_run_fits_its_successes_saves_the_policy_at_its_own_spread_and_resumes(policy_dir, tmp_path,
                                                                                          monkeypatch):
    fitted = []

    def every_decision(storage, rows):  # the tiny policy solves nothing: fit all of its decisions instead
        fitted.append(len(storage))
        return list(range(len(storage)))

    monkeypatch.setattr(rl_train, "successful_decisions", every_decision)
    cfg = replace_fields(CFG, iterations=2, algorithm="filtered", likelihood="flow", steer=True, initial_spread=0.5,
                         spread_lr=0.0, spread_head_lr=0.0, fit_epochs=2, fit_minibatch=2, fit_warmup=1)
    out = tmp_path / "run"
    run(policy_dir, out, cfg, ENV)
    log = lines(out)
    assert [line["iteration"] for line in log] == [0, 1, 2]
    for key in rl_train.UPDATE_KEYS["filtered"]:
        assert key in log[1]
    assert "approx_kl" not in log[1] and fitted == [log[1]["decisions"], log[2]["decisions"]]
    assert log[1]["fit_steps"] == 2 * -(-log[1]["decisions"] // 2)
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
    references = []
    real_update = rl_train.filtered_update

    def recording(*args, reference=None, **kwargs):
        references.append(reference)
        return real_update(*args, reference=reference, **kwargs)

    monkeypatch.setattr(rl_train, "filtered_update", recording)
    monkeypatch.setattr(rl_train, "successful_decisions", lambda storage, rows: list(range(len(storage))))
    cfg = replace_fields(CFG, iterations=1, algorithm="filtered", likelihood="flow", fit_epochs=1, fit_minibatch=4,
                         anchor=1.0)
    start_dir, out = tmp_path / "start", tmp_path / "run"
    shutil.copytree(policy_dir, start_dir)
    run(start_dir, out, cfg, ENV)
    run(tmp_path / "elsewhere", out, replace_fields(cfg, iterations=2), ENV, resume=True)
    start = CompactPolicy.load(start_dir).state_dict()
    assert len(references) == 2 and all(not r.training for r in references)
    for reference in references:  # the policy the run began from, not `last/` nor the directory given to the resume
        assert all(torch.equal(start[k], reference.state_dict()[k]) for k in start)
    assert not all(torch.equal(start[k], load_policy(out / "last").state_dict()[k]) for k in start)
    shutil.rmtree(start_dir)
    with pytest.raises(rl_train.RLError, match="anchor"):
        run(start_dir, out, replace_fields(cfg, iterations=3), ENV, resume=True)
