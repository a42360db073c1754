"""A flow policy driving ChessEnv, one 50-step chunk per decision, without noise.

The initial noise x_0 of every decision is drawn from a torch generator seeded with the episode's
`info["torch_seed"]`, one (T, C) draw per decision in order: two policies run on the same scene see the same
x_0 draws (paired comparisons).
"""

from __future__ import annotations

import torch

from chess_sim.policy.base import FlowPolicy, chunk_actions, observation_batch, sample_chunk


@torch.no_grad()
def run_policy_episode(env, policy: FlowPolicy, seed: int, index: int) -> dict:
    """One episode on scene `(seed, index)`; returns its summary row (`return` and `decisions` included)."""
    from chess_sim.sim.env import episode_summary_row

    observation, info = env.reset(seed=seed, options={"index": index})
    generator = torch.Generator().manual_seed(info["torch_seed"])
    total, decisions = 0.0, 0
    while True:
        batch = observation_batch([observation], [info["instruction"]])
        x0 = torch.randn(1, policy.chunk, policy.chain_dim, generator=generator)
        chunk = chunk_actions(policy, sample_chunk(policy, policy.encode(batch), x0))
        observation, reward, terminated, truncated, info = env.step_chunk(chunk[0].numpy())
        total += reward
        decisions += 1
        if terminated or truncated:
            break
    row = episode_summary_row(info)
    row.update({"return": total, "decisions": decisions})
    return row
