"""Does fitting the flow-matching loss to the policy's own chunks, with no advantage at all, degrade it? (issue #19)

PPO on the flow surrogate (`rl --likelihood flow`) lost 15 points on the test scenes after five updates at lr 3e-5,
while a random weight change of the same size lost nothing (docs/experiments.md). This separates the surrogate's
fit from the RL signal: `--iterations` rounds of `--episodes` noise-free rollouts on fresh training scenes (the
compact profile's simulators, x_0 ~ N(0, 1) as the policy was trained), each followed by the same number of Adam
steps fpo4 took per update (`--epochs` over minibatches of 32 decisions, lr `--lr`), minimising the flow-matching
error of the chunks themselves (the surrogate's draws, equal weight): of every decision (`--chunks all`), or only
of the decisions of successful episodes (`--chunks success`, filtered self-imitation). Each chunk's flow-matching
path starts from fresh noise, as the surrogate's draws do (`--coupling fresh`), or from the decision's own x_0
(`--coupling start`: the pairs (x_0, chunk) of the deterministic sampler, the coupling of rectified flow's reflow);
`--coupling fresh-each-step` draws new noise and times at every step, as `rl --algorithm filtered` does.
`--anchor DATASET` adds the imitation loss of demonstration samples to every step (as many as the step has
decisions, times `--anchor-weight`); `--chunks none` fits that anchor alone, for as many steps as all chunks
would take: the control that tells the fit's own effect from that of fine-tuning at `--lr` at all. `--ema D`
tests an exponential moving average of the weights (decay D per step, `policy/average.py`) instead of the last ones.
`--spread S` starts the rollouts from N(0, S^2); `--schedule cosine` warms each round's fit up over `--warmup` steps
and anneals it to 0 (`rl/filtered.py`'s schedule); `--seed` makes a replicate (its own draws and training scenes).
Then the result and the starting policy on `--test-episodes` test scenes at each of `--test-spreads`, paired (exact
McNemar; `--start-eval` reuses evaluations of the starting policy on those scenes, one per spread). Prints one JSON
object.

    .venv/bin/python benchmarks/self_imitation.py --out DIR [--policy models/baseline-bc]
        [--chunks all|success|none] [--coupling fresh|fresh-each-step|start] [--anchor DATASET]
        [--anchor-episodes 60] [--anchor-weight 1] [--ema D] [--iterations 5] [--episodes 64] [--epochs 4]
        [--lr 3e-5] [--spread 1] [--schedule constant|cosine] [--warmup 50] [--seed 0] [--test-episodes 200]
        [--test-spreads 1 ...] [--start-eval DIR ...]
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

from chess_sim.config import CHUNK, RL_PROFILES, EvalConfig, StartConfig, TrainConfig, profile  # noqa: E402
from chess_sim.data.integrity import checked_metadata, repo_id  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402
from chess_sim.imitation.bc import imitation_loss  # noqa: E402
from chess_sim.imitation.frame_cache import FrameCache  # noqa: E402
from chess_sim.report.compare import compare  # noqa: E402
from chess_sim.policy.average import WeightAverage, averaged  # noqa: E402
from chess_sim.rl.filtered import warmup_cosine  # noqa: E402
from chess_sim.rl.train import build, collect, training_env  # noqa: E402
from chess_sim.sim.vec_env import make_vec_env  # noqa: E402

FIRST_UNUSED_TRAIN_INDEX = 910_000
"""Training-scene indices far beyond any run's (and beyond `rl_signal.py`'s), so no scene is reused."""
SEED_STRIDE = 20_000
"""Replicates (`--seed`) start this many training scenes apart."""


def anchor_frames(root: Path, episodes: int, image_size: int) -> FrameCache:
    """The first `episodes` demonstrations of `root`, decoded once (the anchor's samples)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    meta = checked_metadata(root)
    dataset = LeRobotDataset(repo_id(root), root=root, episodes=list(range(min(episodes, meta.total_episodes))),
                             delta_timestamps={"action": [i / meta.fps for i in range(CHUNK)]})
    return FrameCache(dataset, image_size, workers=1)


def fit_own_chunks(model, storage, chosen: list[int], optimizer, epochs: int, minibatch: int,
                   generator: torch.Generator, coupling: str, anchor: FrameCache | None,
                   anchor_weight: float, average: WeightAverage | None, schedule=None) -> float | None:
    """Adam steps on the mean flow-matching error of the chosen decisions' own chunks (plus `anchor_weight` times
    the imitation loss of as many demonstration samples per step, when `anchor` is given); returns the mean loss of
    the own chunks. With `coupling="start"` each chunk's path starts from the decision's own x_0 (the reflow coupling:
    the deterministic sampler's pairs (x_0, chunk)) instead of the surrogate's fresh noise. With no chosen decision
    and an anchor, the same number of steps as `minibatch`-sized batches of `len(storage)` would take fit the anchor
    alone (the control). `average`, when given, follows the policy's weights after every step; `schedule`, when
    given, steps after every Adam step (the learning rate's schedule over the whole fit)."""
    losses = []
    rows = chosen or list(range(len(storage)))
    for _ in range(epochs):
        order = torch.tensor(rows)[torch.randperm(len(rows), generator=generator)]
        for start in range(0, len(order), minibatch):
            index = order[start:start + minibatch]
            loss = torch.zeros(())
            if chosen:
                chain, prefix, state, _ = storage.minibatch(index)
                noise, times = (model.draw_flow(len(index), generator) if coupling == "fresh-each-step"
                                else storage.flow_draws(index))
                if coupling == "start":
                    noise = chain[:, :1].expand_as(noise)
                log_probs, _ = model.evaluate(chain, prefix, state, flow=(noise, times))
                loss = -log_probs.mean()
                losses.append(float(loss.detach()))
            if anchor is not None:
                batch = anchor.batch(torch.randint(len(anchor), (len(index),), generator=generator))
                loss = loss + anchor_weight * imitation_loss(model.policy, batch, generator, TrainConfig.time_beta)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.policy.parameters(), 1.0)
            optimizer.step()
            if schedule is not None:
                schedule.step()
            if average is not None:
                average.update(model.policy)
    return sum(losses) / len(losses) if losses else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--policy", type=Path, default=Path("models/baseline-bc"))
    parser.add_argument("--chunks", choices=("all", "success", "none"), default="all",
                        help="none: no own chunk, the anchor alone (needs --anchor)")
    parser.add_argument("--anchor", type=Path, help="a demonstration dataset whose imitation loss joins every step")
    parser.add_argument("--anchor-episodes", type=int, default=60)
    parser.add_argument("--anchor-weight", type=float, default=1.0)
    parser.add_argument("--ema", type=float, default=0.0,
                        help="decay of an exponential moving average of the weights, saved and tested instead of the "
                             "last weights (the rollouts still run the last ones); 0: none")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--coupling", choices=("fresh", "fresh-each-step", "start"), default="fresh",
                        help="the noise each chunk's flow-matching path starts from: the surrogate's draws stored with "
                             "the decision, new draws at every step, or the decision's own x_0")
    parser.add_argument("--spread", type=float, default=1.0,
                        help="the rollouts' start spread: x_0 ~ N(0, spread^2) (the fit's noise stays N(0, 1))")
    parser.add_argument("--schedule", choices=("constant", "cosine"), default="constant",
                        help="cosine: each round's fit warms up linearly over --warmup steps, then anneals to 0")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--start-eval", type=Path, nargs="+",
                        help="evaluations of --policy on the same test scenes to pair with, one per --test-spreads, "
                             "instead of running them")
    parser.add_argument("--seed", type=int, default=0,
                        help="a replicate: its own draws, minibatch order and training scenes")
    parser.add_argument("--test-episodes", type=int, default=200)
    parser.add_argument("--test-spreads", type=float, nargs="+", default=[1.0],
                        help="start spreads at which both policies are tested, each paired")
    args = parser.parse_args()
    if args.start_eval and len(args.start_eval) != len(args.test_spreads):
        raise SystemExit("error: give one --start-eval per --test-spreads")
    if args.out.exists():
        raise SystemExit(f"error: {args.out} exists; choose a new --out")
    if args.chunks == "none" and args.anchor is None:
        raise SystemExit("error: --chunks none fits nothing without --anchor")
    compact = RL_PROFILES["compact"]
    start = (StartConfig() if args.spread == 1.0 else
             StartConfig(steer=True, initial_spread=args.spread, spread_lr=0.0, spread_head_lr=0.0, spread_noise=0.0))
    # scored rollouts from the policy's own start (the filtered algorithm's keep no draws and start at its spread)
    cfg = replace(compact, algorithm="ppo", run=replace(compact.run, episodes=args.episodes, seed=args.seed,
                                                        chain_dtype="float32"),
                  ppo=replace(compact.ppo, likelihood="flow"), start=start)
    torch.set_num_threads(1)
    model, _ = build(args.policy, cfg)
    anchor = (anchor_frames(args.anchor, args.anchor_episodes, model.policy.image_size)
              if args.anchor else None)
    optimizer = torch.optim.Adam([p for p in model.policy.parameters() if p.requires_grad], lr=args.lr)
    average = WeightAverage(model.policy, args.ema) if args.ema else None
    generator = torch.Generator().manual_seed(cfg.run.seed)
    began, iterations = time.perf_counter(), []
    with make_vec_env(cfg.run.envs, training_env(model, profile("baseline"))) as vec:
        for iteration in range(args.iterations):
            first = FIRST_UNUSED_TRAIN_INDEX + SEED_STRIDE * args.seed + iteration * args.episodes
            storage, rows, _ = collect(model, vec, cfg, first, generator)
            won = [row["end"] == "success" for row in rows]
            chosen = [i for episode, success in zip(storage.episodes(), won) for i in episode
                      if args.chunks == "all" or (success and args.chunks == "success")]
            steps = args.epochs * -(-len(chosen or storage) // cfg.ppo.minibatch)
            factor = (lambda step: warmup_cosine(step, steps, args.warmup))  # noqa: E731
            schedule = (torch.optim.lr_scheduler.LambdaLR(optimizer, factor) if args.schedule == "cosine" else None)
            loss = (fit_own_chunks(model, storage, chosen, optimizer, args.epochs, cfg.ppo.minibatch, generator,
                                   args.coupling, anchor, args.anchor_weight, average, schedule)
                    if chosen or anchor else None)  # no successful episode and no anchor: nothing to fit
            iterations.append({"iteration": iteration, "success": sum(won) / len(won), "decisions": len(storage),
                               "fitted": len(chosen), "loss": loss})
    fitted = model.policy.base if model.start is not None else model.policy  # tested at each spread, not its own
    with averaged(model.policy, average):
        fitted.save(args.out / "policy")
    anchor_facts = None if args.anchor is None else {"dataset": str(args.anchor), "episodes": args.anchor_episodes,
                                                     "weight": args.anchor_weight}
    tests = {}
    for i, spread in enumerate(args.test_spreads):
        test = EvalConfig(episodes=args.test_episodes, start_spread=spread)
        start_eval = args.start_eval[i] if args.start_eval else args.out / f"test_start_s{spread:g}"
        if not args.start_eval:
            evaluate(args.policy, start_eval, test, profile("baseline"))
        evaluate(args.out / "policy", args.out / f"test_fitted_s{spread:g}", test, profile("baseline"))
        paired = compare(start_eval, args.out / f"test_fitted_s{spread:g}")
        tests[f"{spread:g}"] = {key: paired[key] for key in ("episodes", "success_a", "success_b", "difference",
                                                            "only_a", "only_b", "mcnemar_p")}
    print(json.dumps({"chunks": args.chunks, "coupling": args.coupling, "lr": args.lr, "ema": args.ema,
                      "spread": args.spread, "schedule": args.schedule, "seed": args.seed, "epochs": args.epochs,
                      "anchor": anchor_facts, "iterations": iterations,
                      "minutes": (time.perf_counter() - began) / 60, "tests": tests}))


if __name__ == "__main__":
    main()
