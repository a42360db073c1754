"""Does fitting the flow-matching loss to the policy's own chunks, with no advantage at all, degrade it? (issue #19)

PPO on the flow surrogate (`rl --likelihood flow`) lost 15 points on the test scenes after five updates at lr 3e-5,
while a random weight change of the same size lost nothing (docs/experiments.md). This separates the surrogate's
fit from the RL signal: `--iterations` rounds of `--episodes` noise-free rollouts on fresh training scenes (the
compact profile's simulators, x_0 ~ N(0, 1) as the policy was trained), each followed by the same number of Adam
steps fpo4 took per update (`--epochs` over minibatches of 32 decisions, lr `--lr`), minimising the flow-matching
error of the chunks themselves (the surrogate's draws, equal weight): of every decision (`--chunks all`), or only
of the decisions of successful episodes (`--chunks success`, filtered self-imitation). Then the result and the
starting policy on `--test-episodes` test scenes, paired (exact McNemar). Prints one JSON object.

    .venv/bin/python benchmarks/self_imitation.py --out DIR [--policy models/baseline] [--chunks all|success]
        [--iterations 5] [--episodes 64] [--epochs 4] [--lr 3e-5] [--test-episodes 200]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

from chess_sim.config import RL_PROFILES, EvalConfig, StartConfig, profile  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402
from chess_sim.report.compare import compare  # noqa: E402
from chess_sim.rl.train import build, collect, training_env  # noqa: E402
from chess_sim.sim.vec_env import make_vec_env  # noqa: E402

FIRST_UNUSED_TRAIN_INDEX = 910_000
"""Training-scene indices far beyond any run's (and beyond `rl_signal.py`'s), so no scene is reused."""


def fit_own_chunks(model, storage, chosen: list[int], optimizer, epochs: int, minibatch: int,
                   generator: torch.Generator) -> float:
    """Adam steps on the mean flow-matching error of the chosen decisions' own chunks; returns the mean loss."""
    losses = []
    for _ in range(epochs):
        order = torch.tensor(chosen)[torch.randperm(len(chosen), generator=generator)]
        for start in range(0, len(order), minibatch):
            index = order[start:start + minibatch]
            chain, prefix, state, _ = storage.minibatch(index)
            log_probs, _ = model.evaluate(chain, prefix, state, flow=storage.flow_draws(index))
            loss = -log_probs.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.policy.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
    return sum(losses) / len(losses)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--policy", type=Path, default=Path("models/baseline"))
    parser.add_argument("--chunks", choices=("all", "success"), default="all")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--test-episodes", type=int, default=200)
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"error: {args.out} exists; choose a new --out")
    compact = RL_PROFILES["compact"]
    cfg = replace(compact, run=replace(compact.run, episodes=args.episodes),
                  ppo=replace(compact.ppo, likelihood="flow"), start=StartConfig())
    torch.set_num_threads(1)
    model, _ = build(args.policy, cfg)
    optimizer = torch.optim.Adam([p for p in model.policy.parameters() if p.requires_grad], lr=args.lr)
    generator = torch.Generator().manual_seed(cfg.run.seed)
    began, iterations = time.perf_counter(), []
    with make_vec_env(cfg.run.envs, training_env(model, profile("baseline"))) as vec:
        for iteration in range(args.iterations):
            first = FIRST_UNUSED_TRAIN_INDEX + iteration * args.episodes
            storage, rows, _ = collect(model, vec, cfg, first, generator)
            won = [row["end"] == "success" for row in rows]
            chosen = [i for episode, success in zip(storage.episodes(), won) for i in episode
                      if success or args.chunks == "all"]
            loss = (fit_own_chunks(model, storage, chosen, optimizer, args.epochs, cfg.ppo.minibatch, generator)
                    if chosen else None)  # no successful episode: nothing to fit this round
            iterations.append({"iteration": iteration, "success": sum(won) / len(won), "decisions": len(storage),
                               "fitted": len(chosen), "loss": loss})
    model.policy.save(args.out / "policy")
    test = EvalConfig(episodes=args.test_episodes)
    evaluate(args.policy, args.out / "test_start", test, profile("baseline"))
    evaluate(args.out / "policy", args.out / "test_fitted", test, profile("baseline"))
    paired = compare(args.out / "test_start", args.out / "test_fitted")
    print(json.dumps({"chunks": args.chunks, "lr": args.lr, "iterations": iterations,
                      "minutes": (time.perf_counter() - began) / 60,
                      **{key: paired[key] for key in ("episodes", "success_a", "success_b", "difference", "only_a",
                                                      "only_b", "mcnemar_p")}}))


if __name__ == "__main__":
    main()
