"""The RL learning pilot (issues #6, #19): fine-tune the compact baseline with `chess-sim rl --profile PROFILE`
(`compact`: success-filtered flow matching of the velocity network, deployed at a hand-set start spread) for a
wall-time budget on this machine, then compare `best` and `last` on the test scenes, paired (McNemar), with the
baseline as it samples and, when the run gives it a new start, with the baseline at that start's spread (the
temperature alone). Prints one JSON object: the validation curve (success with Wilson intervals vs iteration and
wall time), the rise over iteration 0, the training rollouts' success over the first and last 10 iterations, the
test comparisons, the rollout time split and decisions/s. The learning curve (success vs iteration and vs wall
time) is also written as a PNG (`--figure`, for docs/experiments.md).

    .venv/bin/python benchmarks/rl_pilot.py [--policy models/baseline] [--out runs/rl_pilot] [--minutes 120]
        [--profile compact] [--ema DECAY] [--anchor WEIGHT] [--test-episodes 200] [--figure docs/rl_pilot.png]
        [--resume]

`--resume` continues the run up to the new `--minutes` (the whole run's budget) and tests `best` and `last` again
when they moved. `--ema` overrides the profile's weight average (`PPOConfig.ema`, per Adam step): what is
validated, saved and tested is then the average of the policy's recent weights, which damps the swings of single
fits. `--anchor` overrides the profile's proximity weight (`FilteredConfig.anchor`): each fit is also pulled
towards the start policy's velocity at the fitted points.

Targets (issue #19): within 4 hours, the RL policy beats the start policy at its best start spread by at least 10
points on the 200 test scenes, McNemar p < 0.01.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.report.compare import compare  # noqa: E402
from chess_sim.config import RL_PROFILES, EvalConfig, profile, replace_fields  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402
from chess_sim.policy.start import has_start  # noqa: E402
from chess_sim.rl.runner import run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline"))
    parser.add_argument("--out", type=Path, default=Path("runs/rl_pilot"))
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--test-episodes", type=int, default=200)
    parser.add_argument("--figure", type=Path, default=Path("docs/rl_pilot.png"))
    parser.add_argument("--profile", choices=sorted(RL_PROFILES), default="compact")
    parser.add_argument("--ema", type=float, default=None,
                        help="the weight average's decay per Adam step (default: the profile's)")
    parser.add_argument("--anchor", type=float, default=None,
                        help="the fits' proximity weight to the start policy (default: the profile's)")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    overrides = {key: value for key, value in (("ema", args.ema), ("anchor", args.anchor)) if value is not None}
    cfg = replace_fields(RL_PROFILES[args.profile], iterations=10_000, minutes=args.minutes, **overrides).config()
    env = profile("baseline")
    log_file = args.out / "rl" / "log.jsonl"
    before = log_file.read_text() if log_file.is_file() else ""
    run(args.policy, args.out / "rl", cfg, env, resume=args.resume, profile_name=args.profile)
    if log_file.read_text() != before:  # a resumed run moved on: its best and last are other weights now
        for name in ("best", "last"):
            shutil.rmtree(args.out / f"test_{name}", ignore_errors=True)
    log = [json.loads(line) for line in log_file.read_text().splitlines()]
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.out / "rl" / "curves.png", args.figure)  # the run draws it at its final validation
    curve = [{"iteration": line["iteration"], "elapsed_min": line["elapsed_s"] / 60,
              "val_success": line["val_success"], "val_success_ci": line["val_success_ci"]}
             for line in log if "val_success" in line]
    test = EvalConfig(episodes=args.test_episodes, envs=cfg.run.envs)
    # the start policy as it samples and, when the run gives it a new start, at that start's spread (the hand-set
    # temperature alone); a policy that brings its own start keeps it, so there the two are one
    references = {"baseline": (args.policy, test)}
    if cfg.start.steer and not has_start(args.policy):
        spread = cfg.start.initial_spread
        references[f"baseline_s{spread:g}"] = (args.policy, replace(test, start_spread=spread))
    runs = {**references, "best": (args.out / "rl" / "best", test), "last": (args.out / "rl" / "last", test)}
    for name, (policy, protocol) in runs.items():
        out = args.out / f"test_{name}"
        evaluate(policy, out, protocol, env, resume=(out / "eval_args.json").is_file())
    keys = ("episodes", "success_a", "success_a_ci", "success_b", "success_b_ci", "difference", "only_a", "only_b",
            "mcnemar_p")
    tests = {f"{b}_vs_{a}": {key: compare(args.out / f"test_{a}", args.out / f"test_{b}")[key] for key in keys}
             for a in references for b in ("best", "last")}
    updates = [line for line in log if line["iteration"] > 0]
    rollout = sum(line["rollout_s"] for line in updates)
    parts = {key: sum(line["rollout_parts"].get(key, 0.0) for line in updates)  # `policy` since December 6, 2026
             for key in ("prep", "sample", "policy", "physics", "render", "resets", "env")}
    print(json.dumps({
        "iterations": len(updates), "minutes": log[-1]["elapsed_s"] / 60, "curve": curve,
        "val_rise_points": 100 * (max(c["val_success"] for c in curve) - curve[0]["val_success"]),
        "test": tests,
        "train_success_first_last": _first_last(updates),
        "rollout_split_s": parts, "rollout_s": rollout, "update_s": sum(line["update_s"] for line in updates),
        "decisions_per_s": sum(line["decisions"] for line in updates) / rollout if rollout else None,
    }))


def _first_last(updates: list[dict], window: int = 10) -> dict:
    """Success of the training rollouts (fresh scenes, the sampling policy) over the first and the last `window`
    iterations (at most half the run's, so the two never overlap): the learning signal on scenes that are never
    repeated, with no fixed draws to be lucky on."""
    window = max(1, min(window, len(updates) // 2))
    def rate(lines):
        episodes = sum(line["train_episodes"] for line in lines)
        return sum(line["train_success"] * line["train_episodes"] for line in lines) / episodes if episodes else None

    return {"window": window, "first": rate(updates[:window]), "last": rate(updates[-window:])}


if __name__ == "__main__":
    main()
