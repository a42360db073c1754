"""The evaluation protocol: determinism, pairing, resume, output schema, videos, comparison, bad input."""

import csv
import json
import os
import subprocess
import sys
from dataclasses import replace

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from chess_sim.cli import main
from chess_sim.report.compare import CompareError, compare, compare_many
from chess_sim.config import CameraConfig, CompactConfig, EvalConfig, profile
from chess_sim.eval import EvalError, _decide, _Episode, evaluate
from chess_sim.policy.base import Normalizer
from chess_sim.policy.compact import CompactPolicy
from chess_sim.report.summary import mcnemar

ENV = replace(profile("baseline"), episode_seconds=2.0, camera=CameraConfig(64, 64))
"""Short episodes and small images: the protocol, not the skill, is under test."""
SMALL = CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=2)


def make_policy(directory, seed=0, action_std=20.0):
    torch.manual_seed(seed)
    normalizer = Normalizer.identity()
    normalizer.action_std = torch.full((6,), action_std)
    normalizer.action_mean = torch.tensor([0.0, -20.0, 20.0, 40.0, 0.0, 30.0])
    CompactPolicy(SMALL, normalizer).save(directory)
    return directory


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return make_policy(tmp_path_factory.mktemp("policy"))


@pytest.fixture(scope="module")
def first_run(policy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "run"
    summary, rows, _ = evaluate(policy_dir, out, EvalConfig(episodes=3, envs=2, videos=1), ENV)
    return out, summary, rows


def test_same_command_twice_gives_identical_files(policy_dir, first_run, tmp_path):
    out, _, _ = first_run
    again = tmp_path / "again"
    evaluate(policy_dir, again, EvalConfig(episodes=3, envs=2, videos=1), ENV)
    for name in ("summary.json", "episodes.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes()


@pytest.mark.parametrize("envs", [1, 3])
def test_outcomes_do_not_depend_on_the_number_of_simulators(policy_dir, first_run, tmp_path, envs):
    out, _, _ = first_run
    evaluate(policy_dir, tmp_path / "other", EvalConfig(episodes=3, envs=envs, videos=1), ENV)
    for name in ("summary.json", "episodes.csv"):
        assert (tmp_path / "other" / name).read_bytes() == (out / name).read_bytes()


def test_early_stop_changes_no_outcome_only_the_length(policy_dir, first_run, tmp_path):
    _, _, rows = first_run
    _, full, _ = evaluate(policy_dir, tmp_path / "full", EvalConfig(episodes=3, envs=2, early_stop=False), ENV)
    assert [row["end"] for row in full] == [row["end"] for row in rows]
    assert all(a["seconds"] <= b["seconds"] for a, b in zip(rows, full))
    assert any(row["end"] not in ("success", "timeout") for row in rows), "no failure tested the early stop"


def test_csv_and_summary_schema(first_run):
    out, summary, rows = first_run
    with open(out / "episodes.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [int(row["index"]) for row in table] == [0, 1, 2]
    for column in ("seed", "index", "piece", "move", "instruction", "end", "clean_lift", "close_lateral_mm",
                   "place_error_mm", "max_tilt_deg", "return", "decisions"):
        assert column in table[0]
    stored = json.loads((out / "summary.json").read_text())
    for key in ("episodes", "success", "return", "clean_lift", "disturbed", "toppled", "success_pawn",
                "success_knight", "close_mm_median"):
        assert key in stored
    assert stored["episodes"] == 3 and sum(stored["ends"].values()) == 3
    assert set(stored["ends_ci"]) == set(stored["ends"])
    lo, hi = stored["success_ci"]
    assert 0.0 <= lo <= stored["success"] <= hi <= 1.0
    # 2 s = 60 steps = two 50-step chunks, unless a settled failure ended the episode sooner
    assert all(row["decisions"] == 2 if row["end"] == "timeout" else 1 <= row["decisions"] <= 2 for row in rows)


def test_video_decodes_with_every_step_and_the_outcome_hold(first_run):
    out, _, rows = first_run
    frames = iio.imread(out / "videos" / "episode_0000.mp4")
    steps = round(rows[0]["seconds"] * 30)
    assert frames.shape[0] == 1 + steps + 30  # reset frame, one per control step, 1 s of outcome
    assert frames.shape[2] == 2 * 64  # both cameras side by side
    assert not (out / "videos" / "episode_0001.mp4").exists()


def test_two_policies_see_the_same_noise_draws(tmp_path):
    """Velocity 0 makes a policy's action chunk its unnormalised x_0: the draws are visible directly."""
    class Still(CompactPolicy):
        def velocity(self, prefix, x_t, t):
            return torch.zeros_like(x_t)

    observation = {"pixels": {"front": np.zeros((64, 64, 3), np.uint8), "wrist": np.zeros((64, 64, 3), np.uint8)},
                   "agent_pos": np.zeros(6, np.float32)}
    chunks = []
    for seed, workers in ((0, (0, 1)), (1, (1, 0))):  # other weights, other worker for each episode
        policy = Still(SMALL, Normalizer.identity())
        torch.manual_seed(seed)
        active = {worker: _Episode(index, observation, {"instruction": "Move the white pawn from e2 to e4."},
                                   torch.Generator().manual_seed(1000 + index), None)
                  for worker, index in zip(workers, (7, 8))}
        decided = _decide(policy, active, EvalConfig())
        chunks.append({active[w].index: decided[w] for w in workers})
    for index in (7, 8):
        assert np.array_equal(chunks[0][index], chunks[1][index])
        expected = torch.randn(1, 50, 6, generator=torch.Generator().manual_seed(1000 + index))[0].numpy()
        assert np.allclose(chunks[0][index], expected, atol=1e-6)
    # a hand-set start spread scales the same draws
    active = {0: _Episode(7, observation, {"instruction": "Move the white pawn from e2 to e4."},
                          torch.Generator().manual_seed(1007), None)}
    narrow = _decide(Still(SMALL, Normalizer.identity()), active, EvalConfig(start_spread=0.5))[0]
    assert np.allclose(narrow, 0.5 * chunks[0][7], atol=1e-6)


def test_shorter_executed_chunks_decide_more_often(policy_dir, tmp_path):
    # 2 s episodes = 60 steps: two decisions executing 50 actions each, or six executing 10
    to_the_limit = EvalConfig(episodes=3, envs=2, early_stop=False)
    _, rows, _ = evaluate(policy_dir, tmp_path / "open", to_the_limit, ENV)
    _, closed, _ = evaluate(policy_dir, tmp_path / "closed", replace(to_the_limit, action_steps=10), ENV)
    assert [row["decisions"] for row in rows if row["seconds"] == 2.0] == [2, 2, 2]
    assert [row["decisions"] for row in closed if row["seconds"] == 2.0] == [6, 6, 6]
    policy = CompactPolicy.load(policy_dir)  # the policy's own setting, saved with it, does the same
    policy.set_action_steps(10)
    policy.save(tmp_path / "closed_policy")
    evaluate(tmp_path / "closed_policy", tmp_path / "own", to_the_limit, ENV)
    assert (tmp_path / "own" / "episodes.csv").read_bytes() == (tmp_path / "closed" / "episodes.csv").read_bytes()


def test_the_chain_sampler_set_for_an_evaluation_is_the_policys_own_saved_setting(policy_dir, tmp_path):
    cfg = EvalConfig(episodes=2, envs=2)
    evaluate(policy_dir, tmp_path / "flags", replace(cfg, denoise_steps=3, time_power=2), ENV)
    policy = CompactPolicy.load(policy_dir)
    policy.set_sampler(3, 2)
    policy.save(tmp_path / "sampler_policy")
    evaluate(tmp_path / "sampler_policy", tmp_path / "own", cfg, ENV)
    assert (tmp_path / "own" / "episodes.csv").read_bytes() == (tmp_path / "flags" / "episodes.csv").read_bytes()
    with pytest.raises(EvalError, match="no such chain"):
        evaluate("expert", tmp_path / "expert", replace(cfg, time_power=2), ENV)


def test_action_steps_beyond_the_chunk_or_for_the_expert_are_refused(policy_dir, tmp_path):
    with pytest.raises(EvalError, match="give 50 actions"):
        evaluate(policy_dir, tmp_path / "long", EvalConfig(episodes=1, envs=1, action_steps=51), ENV)
    with pytest.raises(EvalError, match="scripted expert"):
        evaluate("expert", tmp_path / "expert", EvalConfig(episodes=1, envs=1, action_steps=10), ENV)
    with pytest.raises(ValueError, match="exceeds the chunk"):
        CompactPolicy.load(policy_dir).set_action_steps(51)


def test_a_lerobot_policy_is_evaluated_the_same_whatever_the_number_of_simulators(tiny_act_dir, tmp_path):
    files = []
    for envs in (1, 3):
        summary, rows, _ = evaluate(tiny_act_dir, tmp_path / str(envs), EvalConfig(episodes=3, envs=envs), ENV)
        files.append([(tmp_path / str(envs) / name).read_bytes() for name in ("summary.json", "episodes.csv")])
    assert files[0] == files[1]
    # 2 s episodes, 4 actions per decision (the ACT's n_action_steps), unless an episode ends early
    assert all(row["decisions"] == 15 or row["end"] != "timeout" for row in rows)


def test_noise_is_refused_for_a_policy_without_a_flow_chain(tiny_act_dir, tmp_path):
    for cfg in (EvalConfig(episodes=1, envs=1, noise=(0.1, 0.01)), EvalConfig(episodes=1, envs=1, start_spread=0.5)):
        with pytest.raises(EvalError, match="no such chain"):
            evaluate(tiny_act_dir, tmp_path / "out", cfg, ENV)


def test_resume_runs_only_the_missing_episodes(policy_dir, first_run, tmp_path, monkeypatch):
    out, _, _ = first_run
    partial = tmp_path / "partial"
    cfg = EvalConfig(episodes=3, envs=2, videos=1)
    evaluate(policy_dir, partial, replace(cfg, episodes=3), ENV)
    lines = (partial / "progress.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["index"] != 1]
    (partial / "progress.jsonl").write_text("\n".join(kept) + "\n" + lines[-1][:20])  # a line cut by a kill
    (partial / "summary.json").unlink()
    with pytest.raises(EvalError, match="--resume"):
        evaluate(policy_dir, partial, cfg, ENV)
    ran = []
    import chess_sim.eval as module
    original = module._EvalDriver.start
    monkeypatch.setattr(module._EvalDriver, "start",
                        lambda self, index, *a: ran.append(index) or original(self, index, *a))
    evaluate(policy_dir, partial, cfg, ENV, resume=True)
    assert ran == [1]
    for name in ("summary.json", "episodes.csv"):
        assert (partial / name).read_bytes() == (out / name).read_bytes()


def test_an_output_folder_of_another_run_is_refused(policy_dir, first_run, tmp_path):
    out, _, _ = first_run
    with pytest.raises(EvalError, match="no evaluation to resume"):
        evaluate(policy_dir, tmp_path / "new", EvalConfig(episodes=4, envs=2, videos=1), ENV, resume=True)
    assert not (tmp_path / "new").exists()
    with pytest.raises(EvalError, match="other arguments"):
        evaluate(policy_dir, out, EvalConfig(episodes=4, envs=2, videos=1), ENV, resume=True)


def test_an_evaluation_saves_the_chain_sampler_only_when_set_so_older_evaluations_resume(policy_dir, first_run,
                                                                                       tmp_path):
    out, _, _ = first_run
    assert "time_power" not in json.loads((out / "eval_args.json").read_text())["eval"]
    evaluate(policy_dir, tmp_path / "set", EvalConfig(episodes=1, envs=1, time_power=2), ENV)
    assert json.loads((tmp_path / "set" / "eval_args.json").read_text())["eval"]["time_power"] == 2


def test_an_evaluation_saved_with_a_retired_field_at_its_old_default_still_resumes(policy_dir, first_run, tmp_path):
    out, _, _ = first_run
    for scale, resumes in ((None, True), (2.0, False)):
        old = tmp_path / f"old_{scale}"
        old.mkdir()
        for name in ("eval_args.json", "progress.jsonl"):
            (old / name).write_bytes((out / name).read_bytes())
        saved = json.loads((old / "eval_args.json").read_text())
        saved["env"]["camera"]["observation_scale"] = scale  # as evaluations saved it before it was retired
        (old / "eval_args.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
        if resumes:
            evaluate(policy_dir, old, EvalConfig(episodes=3, envs=2, videos=1), ENV, resume=True)
            assert (old / "summary.json").read_bytes() == (out / "summary.json").read_bytes()
        else:
            with pytest.raises(EvalError, match="other arguments"):
                evaluate(policy_dir, old, EvalConfig(episodes=3, envs=2, videos=1), ENV, resume=True)


def test_compare_counts_discordant_pairs(policy_dir, first_run, tmp_path):
    out, _, rows = first_run
    other = tmp_path / "other"
    other.mkdir()
    text = (out / "episodes.csv").read_text().splitlines()
    header, body = text[0], text[1:]
    flipped = body[0].replace(f",{rows[0]['end']},", ",success," if rows[0]["end"] != "success" else ",timeout,")
    (other / "episodes.csv").write_text("\n".join([header, flipped, *body[1:]]) + "\n")
    result = compare(out, other)
    assert result["episodes"] == 3 and len(result["changed"]) == 1
    assert result["only_a"] + result["only_b"] == 1 and result["mcnemar_p"] == 1.0
    with pytest.raises(CompareError, match="no summary.json"):  # a table also reads each summary
        compare_many([out, other])
    (other / "summary.json").write_text("{oops")
    with pytest.raises(CompareError, match="not an evaluation summary"):
        compare_many([out, other])


def test_mcnemar_exact_hand_values():
    assert mcnemar(0, 0) == 1.0
    assert mcnemar(1, 5) == pytest.approx(2 * (1 + 6) / 64)  # two-sided binomial tail, n = 6
    assert mcnemar(0, 10) == pytest.approx(2 / 1024)
    assert mcnemar(7, 3) == mcnemar(3, 7)


@pytest.mark.parametrize("setup, argv_tail, words", [
    (lambda d: None, [], "no config.json"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text("{oops")), [], "not valid JSON"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text('{"kind": "compact", "config": {}}'),
                (d / "model.safetensors").write_bytes(b"garbage")), [], "damaged"),
    (lambda d: None, ["--episodes", "0"], "--episodes must be >= 1"),
])
def test_bad_input_is_one_line(setup, argv_tail, words, tmp_path, capsys):
    policy = tmp_path / "policy"
    setup(policy)
    argv = ["eval", "--policy", str(policy), "--out", str(tmp_path / "out"), *argv_tail]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_cli_expert_eval_and_compare_smoke(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert main(["eval", "--policy", "expert", "--episodes", "1", "--envs", "1", "--out", str(out),
                     "--check-expert"]) == 0
    summary = json.loads((a / "summary.json").read_text())
    assert summary["expert_solvable"] == 1 and summary["success_expert_solvable"] == summary["success"]
    assert "expert_solvable" in (a / "episodes.csv").read_text().splitlines()[0]
    assert main(["eval", "--compare", str(a), str(b), "--json", str(tmp_path / "cmp.json")]) == 0
    result = json.loads((tmp_path / "cmp.json").read_text())
    assert result["episodes"] == 1 and result["changed"] == []
    assert main(["eval", "--compare", str(a), str(tmp_path / "none")]) == 2
    assert main(["eval", "--compare", str(a)]) == 2
    capsys.readouterr()
    assert main(["eval", "--compare", str(a), str(b), str(a), "--json", str(tmp_path / "table.json")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 5 and "reference" in table[2] and "+0.0, 0 / 0, p = 1" in table[3]
    rows = json.loads((tmp_path / "table.json").read_text())["rows"]
    assert [row["evaluation"] for row in rows] == [str(a), str(b), str(a)] and rows[1]["mcnemar_p"] == 1.0
    reader, writer = os.pipe()
    os.close(reader)  # a reader that has gone (`| head`): every write to the pipe fails
    done = subprocess.run([sys.executable, "-m", "chess_sim.cli", "eval", "--compare", str(a), str(b)], stdout=writer,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(writer)
    assert done.returncode == 0 and done.stderr == ""


def test_a_policy_with_nan_actions_is_judged_policy_error_and_the_evaluation_goes_on(tmp_path, capsys):
    broken = make_policy(tmp_path / "nan", action_std=float("nan"))
    assert main(["eval", "--policy", str(broken), "--episodes", "2", "--envs", "1", "--out", str(tmp_path / "e")]) == 0
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["ends"]["policy_error"] == 2 and summary["success"] == 0.0
    assert "policy_error 2" in capsys.readouterr().out
