"""How much signal is in one PPO gradient? The gradient noise scale of RL fine-tuning (issue #6).

One rollout of `--episodes` training episodes with the noisy policy (the compact profile's episodes and simulators, the start as the
policy was trained, and the seed's chain noise 0.2 -> 0.002 or the sizes given); then, at ratio 1 (the first gradient of an iteration), each episode's policy gradient
    g_e = sum over the episode's decisions d of  A_d * grad sum_{k,t,a} log p_d(k, t, a)
with PPO's normalised GAE advantages. From the N per-episode gradients, unbiased estimates of the squared norm
of the true gradient |G|^2 and of the per-episode noise tr(Sigma) give the *simple noise scale*
    B = tr(Sigma) / |G|^2
(McCandlish et al., 2018): about the number of episodes one gradient needs before its signal matches its
noise. It is also split by denoising steps (first, middle and last third of the chain), since exact log-probs
weigh a step's score by 1 / sigma_k. A |G|^2 estimate at or below 0 means no signal was measurable at this N.

    .venv/bin/python benchmarks/research/rl_signal.py [--policy models/baseline-bc] [--episodes 64]
        [--sigma-start S] [--sigma-end E]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

from chess_sim.config import PPOConfig, RL_PROFILES, profile, replace_fields  # noqa: E402
from chess_sim.rl.gae import normalized  # noqa: E402
from chess_sim.rl.runner import build, collect, training_env  # noqa: E402
from diagnostics import episode_gradients, gradient_noise_scale  # noqa: E402
from chess_sim.sim.backends import make_vec_env  # noqa: E402

FIRST_UNUSED_TRAIN_INDEX = 900_000
"""Training-scene indices far beyond any run's, so this rollout does not reuse a pilot's scenes."""


def stored_episodes(storage) -> list:
    """Each stored episode's (chains, prefix, states, normalised GAE advantages), as `episode_gradients` takes them."""
    advantages = normalized(storage.advantages)
    out = []
    for episode in storage.episodes():
        index = torch.tensor(episode)
        chain, prefix, state, _ = storage.minibatch(index)
        out.append((chain, prefix, state, advantages[index]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline-bc"))
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--sigma-start", type=float)
    parser.add_argument("--sigma-end", type=float)
    args = parser.parse_args()
    # the chain's own signal: the seed's noise sizes unless given, the start as the policy was trained (N(0, I))
    noise = {"sigma_start": args.sigma_start or PPOConfig.sigma_start, "sigma_end": args.sigma_end or PPOConfig.sigma_end}
    cfg = replace_fields(RL_PROFILES["compact"], algorithm="ppo", episodes=args.episodes, steer=False,
                         **noise).config()
    torch.set_num_threads(2)
    algorithm = build(args.policy, cfg)
    model = algorithm.model
    began = time.perf_counter()
    with make_vec_env(cfg.run.envs, training_env(model, profile("baseline"))) as vec:
        storage, rows, _ = collect(algorithm, vec, cfg, FIRST_UNUSED_TRAIN_INDEX,
                                   torch.Generator().manual_seed(cfg.run.seed))
    storage.finish(cfg.algorithm.gamma, cfg.algorithm.lam)
    rollout_s = time.perf_counter() - began
    steps = model.policy.steps
    thirds = {"first": slice(0, steps // 3), "middle": slice(steps // 3, 2 * steps // 3),
              "last": slice(2 * steps // 3, steps)}
    episodes = stored_episodes(storage)
    parts = {name: episode_gradients(model, algorithm.sigmas, episodes, chosen) for name, chosen in thirds.items()}
    result = {name: gradient_noise_scale(gradients) for name, gradients in parts.items()}
    result["all"] = gradient_noise_scale(sum(parts.values()))
    print(json.dumps({
        "episodes": len(rows), "decisions": len(storage),
        "noisy_success": sum(row["end"] == "success" for row in rows) / len(rows),
        "sigma_start": cfg.algorithm.sigma_start, "sigma_end": cfg.algorithm.sigma_end, "steps": steps,
        "rollout_s": rollout_s, "gradient_s": time.perf_counter() - began - rollout_s, **result,
    }))


if __name__ == "__main__":
    main()
