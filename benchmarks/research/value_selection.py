"""Value-guided selection among start draws (V-GPS, Nakamoto et al. 2024), measured before it is built (issue #50):
can a chunk critic trained on the policy's own rollouts pick, among N start draws per decision, chunks that succeed
more often than the first draw?

1. `collect`: evaluate the policy on training scenes (the RL training seed), recording per decision the pooled
   prefix features (F,) and the normalised chunk it executed (T, C); each is labelled with its episode's success.
2. `fit`: Q(features, chunk) -> success logit, a LayerNorm MLP fitted by cross-entropy on 80% of the episodes; the
   held-out decisions' AUC says whether it ranks at all.
3. `select`: evaluate on the test scenes with N draws per decision, twice with the same candidates: executing the
   first draw (the policy as it is) or the draw Q ranks best; paired McNemar between the two.

Prints one JSON line per phase. Example (about 25 minutes on two cores):
    MUJOCO_GL=egl .venv/bin/python benchmarks/research/value_selection.py --policy models/baseline \
        --out runs/vgps --train-episodes 1024 --test-episodes 200 --candidates 4
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from chess_sim import eval as evaluation
from chess_sim.config import TEST_SEED, EvalConfig, RunConfig, profile
from chess_sim.policy.base import chunk_actions, in_blocks, observation_batch, sample_chain
from chess_sim.report.compare import compare


class ChunkCritic(nn.Module):
    """Q(features (B, F), chunk (B, T, C)) -> (B,) success logit."""

    def __init__(self, features: int, chunk_size: int, width: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features + chunk_size, width), nn.LayerNorm(width), nn.GELU(),
                                 nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(), nn.Linear(width, 1))

    def forward(self, features: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([features, chunks.flatten(1)], dim=1)).squeeze(1)


def selecting_decide(candidates: int, critic: ChunkCritic | None, record: list | None, inputs: str = "pooled"):
    """An `eval._decide` that draws `candidates` starts per decision from each episode's generator and executes the
    first (critic None) or the one the critic ranks best; `record` collects (scene index, features, chunk).
    `inputs`: the critic's view of the observation, `pooled` (the prefix tokens' mean) or `rich` (also their
    maximum, the compact policy's task vector of state and instruction, the joints / 100 and the decision number)."""

    @torch.no_grad()
    def decide(policy, active, cfg):
        workers = sorted(active)
        episodes = [active[worker] for worker in workers]
        shape = (1, policy.chunk, policy.chain_dim)
        observations = [e.observation for e in episodes for _ in range(candidates)]
        instructions = [e.info["instruction"] for e in episodes for _ in range(candidates)]
        x0 = torch.cat([cfg.start_spread * torch.randn(shape, generator=e.generator)
                        for e in episodes for _ in range(candidates)])

        def compute(rows, start):
            prefix = policy.encode(rows)
            pooled = policy.features(prefix)
            if inputs == "rich":
                pooled = torch.cat([pooled, prefix["tokens"].amax(1), prefix["task"]], dim=1)
            return sample_chain(policy, prefix, start)[:, -1], pooled

        batch = observation_batch(observations, instructions)
        chunks, features = in_blocks(compute, batch, x0)
        chunks = chunks.view(len(episodes), candidates, *chunks.shape[1:])
        features = features.view(len(episodes), candidates, -1)[:, 0]
        if inputs == "rich":
            state = batch["observation.state"].view(len(episodes), candidates, -1)[:, 0] / 100
            step = torch.tensor([[e.decisions / 12] for e in episodes])
            features = torch.cat([features, state.float(), step], dim=1)
        if critic is None:
            picks = torch.zeros(len(episodes), dtype=torch.long)
        else:
            scores = critic(features.repeat_interleave(candidates, 0), chunks.flatten(0, 1).float())
            picks = scores.view(len(episodes), candidates).argmax(1)
        chosen = chunks[torch.arange(len(episodes)), picks]
        if record is not None:
            record.extend((e.info["index"], features[i].clone(), chosen[i].clone()) for i, e in enumerate(episodes))
        executed = cfg.action_steps or policy.action_steps
        actions = chunk_actions(policy, chosen)[:, :executed].numpy()
        return {worker: actions[i] for i, worker in enumerate(workers)}

    return decide


def run_eval(policy: str, out: Path, episodes: int, seed: int, decide) -> list[dict]:
    """An evaluation with `decide` in place of the protocol's own decision (pass 1 candidate and no critic and it is
    the protocol's: the same draws in the same order)."""
    evaluation._decide = decide
    _, rows, _ = evaluation.evaluate(policy, out, EvalConfig(episodes=episodes, seed=seed), profile("baseline"))
    return rows


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The probability that a random success scores above a random failure (ties count half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + 0.5 * ties)


def fit(data: dict, steps: int, seed: int) -> tuple[ChunkCritic, dict]:
    torch.manual_seed(seed)
    features, chunks, labels, scenes = data["features"], data["chunks"], data["labels"], data["scenes"]
    unique = torch.unique(scenes)
    held = set(unique[torch.randperm(len(unique))[: len(unique) // 5]].tolist())
    test_mask = torch.tensor([int(s) in held for s in scenes])
    train_mask = ~test_mask
    critic = ChunkCritic(features.shape[1], chunks[0].numel())
    optimizer = torch.optim.AdamW(critic.parameters(), lr=3e-4, weight_decay=1e-2)
    index = train_mask.nonzero().squeeze(1)
    for _ in range(steps):
        batch = index[torch.randint(len(index), (256,))]
        loss = nn.functional.binary_cross_entropy_with_logits(critic(features[batch], chunks[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    critic.eval()
    with torch.no_grad():
        scores = critic(features, chunks).numpy()
    y = labels.numpy()
    return critic, {"decisions": len(labels), "episodes": len(unique), "held_out_episodes": len(held),
                    "success_share": float(y.mean()), "train_auc": auc(scores[train_mask.numpy()], y[train_mask.numpy()]),
                    "held_out_auc": auc(scores[test_mask.numpy()], y[test_mask.numpy()])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--train-episodes", type=int, default=1024)
    parser.add_argument("--test-episodes", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--fit-steps", type=int, default=3000)
    parser.add_argument("--inputs", choices=("pooled", "rich"), default="pooled")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data_path = args.out / "decisions.pt"
    if not data_path.is_file():
        began, record = time.perf_counter(), []
        rows = run_eval(args.policy, args.out / "collect", args.train_episodes, RunConfig.train_seed,
                        selecting_decide(1, None, record, args.inputs))
        success = {row["index"]: row["end"] == "success" for row in rows}
        data = {"scenes": torch.tensor([r[0] for r in record]), "features": torch.stack([r[1] for r in record]),
                "chunks": torch.stack([r[2] for r in record]).float(),
                "labels": torch.tensor([float(success[r[0]]) for r in record])}
        torch.save(data, data_path)
        print(json.dumps({"phase": "collect", "episodes": len(rows), "decisions": len(record),
                          "success": float(np.mean(list(success.values()))),
                          "seconds": round(time.perf_counter() - began, 1)}), flush=True)
    data = torch.load(data_path, weights_only=True)
    critic, fitted = fit(data, args.fit_steps, seed=0)
    print(json.dumps({"phase": "fit", **fitted}), flush=True)
    arms = {"first": None, "critic": critic}
    for name, chooser in arms.items():
        began = time.perf_counter()
        run_eval(args.policy, args.out / f"select_{name}", args.test_episodes, TEST_SEED,
                 selecting_decide(args.candidates, chooser, None, args.inputs))
        print(json.dumps({"phase": "select", "arm": name, "seconds": round(time.perf_counter() - began, 1)}),
              flush=True)
    result = compare(args.out / "select_first", args.out / "select_critic")
    knights = {f"knight_{name}": json.loads((args.out / f"select_{name}" / "summary.json").read_text())[
        "success_knight"] for name in arms}
    print(json.dumps({"phase": "paired", "candidates": args.candidates, **knights,
                      **{key: result[key] for key in result if key != "changed"}}), flush=True)


if __name__ == "__main__":
    main()
