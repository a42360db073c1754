"""What the RL unit tests share: a small compact policy, observation batches, and stored rollouts."""

import torch

from chess_sim.config import CompactConfig
from chess_sim.policy.base import Normalizer
from chess_sim.policy.compact import CompactPolicy
from chess_sim.rl.flow_rl import FlowRL, RolloutSpec
from chess_sim.rl.storage import Decision, Storage, split_prefix

SMALL = CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=4)


def small_policy(seed: int = 0) -> CompactPolicy:
    torch.manual_seed(seed)
    return CompactPolicy(SMALL, Normalizer.identity()).eval()


def batch_of(size, seed=0):
    generator = torch.Generator().manual_seed(seed)
    images = lambda: torch.rand(size, 3, 48, 48, generator=generator)  # noqa: E731
    return {"observation.images.front": images(), "observation.images.wrist": images(),
            "observation.state": torch.randn(size, 6, generator=generator) * 10,
            "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."][:size] * (size // 2 or 1)}


def stored_rollout(model: FlowRL, spec: RolloutSpec, episodes: int = 2,
                   reward=lambda i, episode, sample: float(i + episode), seed: int = 3) -> Storage:
    """`episodes` episodes of two decisions each, sampled as `spec` says, with rewards `reward(i, episode, sample)`."""
    storage = Storage()
    generator = torch.Generator().manual_seed(seed)
    steps = model.policy.steps
    for episode in range(episodes):
        batch = batch_of(2, seed=episode)
        x0, noise = torch.randn(2, 50, 6, generator=generator), torch.randn(2, steps, 50, 6, generator=generator)
        draw = torch.randn(2, 1, generator=generator) if model.spread_noise > 0 else None
        sample = model.sample(batch, x0, noise, draw, spec)
        prefixes = split_prefix(sample.prefix, 2)
        row = lambda value, i: None if value is None else value[i]  # noqa: E731
        decisions = [Decision(sample.chain[i], row(sample.log_probs, i),
                              0.0 if sample.value is None else float(sample.value[i]), batch["observation.state"][i],
                              prefixes[i], reward=reward(i, episode, sample), spread=row(sample.spread, i),
                              spread_log_prob=row(sample.spread_log_probs, i)) for i in range(2)]
        storage.add_episode(decisions, bootstrap=0.0)
    return storage
