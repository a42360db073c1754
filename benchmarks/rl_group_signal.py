"""Does a group baseline reveal the chain's gradient signal? A diagnostic for issue #19, before any long run.

`rl_signal.py` found no measurable signal in the chain's PPO gradient at 64 episodes: the start draw x_0 decides
most outcomes, and no chain parameter is credited for it. Here `--groups` training scenes are each run by
`--members` episodes that share the scene and every decision's start draw (a generator seeded by the scene's
`torch_seed`, as evaluation does) and differ only in the chain's noise (a generator seeded by the scene and the
member). The simulator is deterministic, so within a group only the chain's noise tells the returns apart.

On the same rollout, each episode's policy gradient of the chain (velocity network) at ratio 1,
    g_e = A_e * grad sum over its decisions, denoising steps, timesteps and joints of log p,
under two advantages: the return minus its group's mean (GRPO; the start's share of the variance cancels) and the
return minus the batch mean (what a baseline blind to the start gets). For each, the simple noise scale
B = tr(Sigma) / |G|^2 (`chess_sim.rl.diagnostics.gradient_noise_scale`), overall and per third of the chain.
Under the same advantages also the gradient of the flow-matching surrogate (FPO: the advantage-weighted
flow-matching loss of each executed chunk, `--flow-draws` noise and time draws per decision; `flow_matching`).

    .venv/bin/python benchmarks/rl_group_signal.py [--policy models/baseline-bc] [--groups 16] [--members 4]
        [--sigma-start 0.2] [--sigma-end 0.002] [--spread 1.0] [--flow-draws 4]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

from chess_sim.config import TRAIN_SEED, NoiseConfig, StartConfig, profile  # noqa: E402
from chess_sim.policy.base import observation_batch  # noqa: E402
from chess_sim.policy.loading import load_policy  # noqa: E402
from chess_sim.rl.diagnostics import episode_flow_gradients, episode_gradients, gradient_noise_scale  # noqa: E402
from chess_sim.rl.flow_rl import FlowRL  # noqa: E402
from chess_sim.rl.train import training_env  # noqa: E402
from chess_sim.scheduler import drive  # noqa: E402
from chess_sim.sim.vec_env import make_vec_env  # noqa: E402

FIRST_UNUSED_TRAIN_INDEX = 950_000
"""Training-scene indices far beyond any run's."""


@dataclass
class _Episode:
    index: int
    member: int
    observation: dict
    info: dict
    starts: torch.Generator
    noise: torch.Generator
    chains: list = field(default_factory=list)
    prefixes: list = field(default_factory=list)
    states: list = field(default_factory=list)
    total: float = 0.0


class GroupDriver:
    """`scheduler.Driver`: members of a group share the start draws (unless `shared_starts` is False), each has its
    own chain noise."""

    def __init__(self, model: FlowRL, shared_starts: bool, noisy: bool):
        self.model = model
        self.shared_starts = shared_starts
        self.noisy = noisy
        self.started: Counter = Counter()
        self.done: list[_Episode] = []

    def start(self, index, observation, info):
        member = self.started[index]
        self.started[index] += 1
        seed = info["torch_seed"]
        starts = seed if self.shared_starts else seed * 1_000 + member + 500
        return _Episode(index, member, observation, info, torch.Generator().manual_seed(starts),
                        torch.Generator().manual_seed(seed * 1_000 + member + 1))

    def filmed(self, index):
        return False

    def forget(self, episode):
        self.started[episode.index] -= 1

    @torch.no_grad()
    def decide(self, episodes):
        workers = sorted(episodes)
        running = [episodes[w] for w in workers]
        policy = self.model.policy
        shape = (policy.chunk, policy.chain_dim)
        x0 = torch.stack([torch.randn(shape, generator=e.starts) for e in running])
        noise = torch.stack([torch.randn((policy.steps, *shape), generator=e.noise) for e in running])
        batch = observation_batch([e.observation for e in running], [e.info["instruction"] for e in running])
        sample = self.model.sample(batch, x0, noise if self.noisy else None)
        chunks = self.model.actions(sample.chain).numpy()
        for i, episode in enumerate(running):
            episode.chains.append(sample.chain[i])
            episode.prefixes.append({k: v[i:i + 1] for k, v in sample.prefix.items()})
            episode.states.append(batch["observation.state"][i])
        return {worker: chunks[i] for i, worker in enumerate(workers)}

    def step(self, episode, result):
        episode.total += result.reward
        episode.observation, episode.info = result.observation, result.info
        if result.terminated or result.truncated:
            episode.end = result.info["end"]
            self.done.append(episode)
            return True
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline-bc"))
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--sigma-start", type=float, default=NoiseConfig.sigma_start,
                        help="0: a noise-free chain (only the flow-matching gradient is measured)")
    parser.add_argument("--sigma-end", type=float, default=NoiseConfig.sigma_end)
    parser.add_argument("--spread", type=float, default=1.0, help="the start's spread (1: as the policy was trained)")
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--flow-draws", type=int, default=4, help="noise and time draws per decision (FPO)")
    parser.add_argument("--shared-starts", action=argparse.BooleanOptionalAction, default=True,
                        help="members of a group share every decision's start draw")
    args = parser.parse_args()
    if args.groups < 2 or args.members < 2:
        parser.error("--groups and --members must be >= 2")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    noisy = args.sigma_start > 0
    noise = NoiseConfig(sigma_start=args.sigma_start, sigma_end=args.sigma_end) if noisy else NoiseConfig()
    model = FlowRL(load_policy(args.policy), noise, StartConfig(steer=args.spread != 1.0),
                   flow_draws=args.flow_draws).eval()
    if model.start is not None:
        with torch.no_grad():
            model.start.log_std.fill_(math.log(args.spread))
    driver = GroupDriver(model, args.shared_starts, noisy)
    scenes = [FIRST_UNUSED_TRAIN_INDEX + g for g in range(args.groups)]
    began = time.perf_counter()
    with make_vec_env(args.envs, training_env(model, profile("baseline"))) as vec:
        drive(vec, TRAIN_SEED, [scene for scene in scenes for _ in range(args.members)], driver)
    rollout_s = time.perf_counter() - began
    episodes = sorted(driver.done, key=lambda e: (e.index, e.member))
    returns = torch.tensor([e.total for e in episodes])
    group_means = returns.view(args.groups, args.members).mean(dim=1).repeat_interleave(args.members)
    successes = torch.tensor([e.end == "success" for e in episodes]).view(args.groups, args.members).sum(dim=1)
    schemes = {"group": returns - group_means, "batch": returns - returns.mean()}
    steps = model.policy.steps
    thirds = {"first": slice(0, steps // 3), "middle": slice(steps // 3, 2 * steps // 3),
              "last": slice(2 * steps // 3, steps)}
    # a per-episode gradient is linear in the episode's advantage: the unit gradients serve both schemes
    data = [(torch.stack(e.chains), {k: torch.cat([p[k] for p in e.prefixes]) for k in e.prefixes[0]},
             torch.stack(e.states), torch.ones(len(e.chains))) for e in episodes]
    unit = {third: episode_gradients(model, data, chosen) for third, chosen in thirds.items()} if noisy else {}
    flow = episode_flow_gradients(model, data, torch.Generator().manual_seed(0))
    result = {}
    for name, advantages in schemes.items():
        weights = (advantages / (advantages.std() + 1e-8))[:, None]
        result[name] = {third: gradient_noise_scale(weights * gradients) for third, gradients in unit.items()}
        if unit:
            result[name]["all"] = gradient_noise_scale(weights * sum(unit.values()))
        result[name]["flow_matching"] = gradient_noise_scale(weights * flow)
    print(json.dumps({
        "groups": args.groups, "members": args.members, "sigma_start": args.sigma_start, "sigma_end": args.sigma_end,
        "spread": args.spread, "shared_starts": args.shared_starts, "flow_draws": args.flow_draws, "success": float(successes.sum()) / len(episodes),
        "groups_by_successes": torch.bincount(successes, minlength=args.members + 1).tolist(),
        "return_variance": {"total": float(returns.var(correction=0)),
                            "within_groups": float((returns - group_means).var(correction=0))},
        "rollout_s": rollout_s, "gradient_s": time.perf_counter() - began - rollout_s, **result,
    }))


if __name__ == "__main__":
    main()
