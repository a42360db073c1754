"""The FlowPolicy protocol shared by every policy, the flow-matching time convention, and normalisation.

Time convention (LeRobot's SmolVLA), stated once here and used everywhere:
    x_t = t * noise + (1 - t) * action,   t in [0, 1]; the velocity target is v = noise - action.
Sampling integrates with Euler from t = 1 (pure noise x_0) to t = 0 (the action chunk) in K steps:
    t_k = (1 - k / K)^p,   x_{k+1} = x_k + dt_k * v(x_k, t_k),   dt_k = t_{k+1} - t_k,   k = 0 .. K-1.
p = 1 (`time_power`) is LeRobot's uniform grid, dt_k = -1 / K; p = 2 takes its small steps near the action end,
where the chunks' fine detail is decided (docs/experiments.md, "Euler steps of the sampler").

Shapes: B decisions, T = 50 control steps per chunk, A = 6 joints. The denoising chain runs over C >= A
dimensions (`chain_dim`): SmolVLA pads actions to 32 and its noise covers the padding; only the first A are
actions, and only they count in losses and log-probs. Actions and states inside a policy are normalised
(`Normalizer`); `chunk_actions` returns LeRobot's SO-101 units (degrees, gripper 0-100).
A batch is a dict with LeRobot's feature names: `observation.images.front` and `observation.images.wrist`
(B, 3, H, W) float in [0, 1], `observation.state` (B, 6) in SO-101 units, and `task` (B strings).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F

from chess_sim.config import ACTION_DIM, CHUNK, DENOISE_STEPS  # noqa: F401 - the shapes every policy shares
from chess_sim.config import EnvConfig


@runtime_checkable
class FlowPolicy(Protocol):
    """What FlowRL, evaluation and training need from a policy; nothing downstream branches on the model."""

    chunk: int
    action_steps: int
    """Actions of each chunk a decision executes before the policy decides again (1..chunk; fewer than `chunk`:
    closed loop). Saved with the policy; `set_action_steps` changes it."""
    action_dim: int
    chain_dim: int
    steps: int
    time_power: int
    """p of the chain's time grid t_k = (1 - k/K)^p (1: LeRobot's uniform grid); `set_sampler` changes it and K."""
    image_size: int | None
    """Side of the square images the policy resizes its inputs to (None: it takes any size as it comes)."""
    normalizer: "Normalizer"

    def encode(self, batch: dict[str, Any]) -> Any:
        """Everything computed once per decision (image/text/state features, a VLM's KV cache): a prefix
        whose tensors all have the batch as their first dimension."""

    def velocity(self, prefix: Any, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """v(x_t, t): x_t (B, T, C) normalised, t (B,) in [0, 1] -> (B, T, C)."""

    def prepare_chain(self, prefix: Any) -> Any:
        """The prefix with what every velocity call of one chain shares computed once (the compact policy: its
        layers' cross-attention keys and values); `velocity` gives the same result with either, bit for bit."""

    def features(self, prefix: Any) -> torch.Tensor:
        """Pooled prefix features (B, F) for a critic."""

    def start_distribution(self, prefix: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The chain's start x_0 ~ N(mean, std^2), mean and std broadcastable to (B, T, C): N(0, I)
        (`standard_start`) unless the policy carries a learned start (`policy/start.py`); a standard-normal draw d
        starts the chain at mean + std * d (`start_of`)."""

    def set_action_steps(self, steps: int) -> None:
        """Execute `steps` actions per decision from now on (and in the saved policy); ValueError outside 1..chunk."""

    def set_sampler(self, steps: int, time_power: int) -> None:
        """Sample with K = `steps` Euler steps on the grid of power `time_power` from now on (and in the saved
        policy); ValueError where the policy cannot (below 1, or a grid its own library would not sample)."""

    def save(self, directory) -> None:
        """Write the policy so that `policy.loading.load_policy(directory)` restores it bit-exactly."""


def observed_env(policy: FlowPolicy, env_cfg: EnvConfig) -> EnvConfig:
    """`env_cfg` whose observations come at the policy's input size when that is below the frames': the
    simulator resizes as the policy would, and renders, sends and decodes fewer pixels."""
    size = policy.image_size
    camera = env_cfg.camera
    if size is None or size >= min(camera.width, camera.height):
        return env_cfg
    return replace(env_cfg, camera=replace(camera, observation_size=size))


def use_sampler(policy: FlowPolicy, steps: int = 0, time_power: int = 0) -> None:
    """Make `policy` sample with `steps` Euler steps on the grid of `time_power` (0 for either: the policy's own);
    ValueError (one line) where it cannot."""
    if steps or time_power:
        policy.set_sampler(steps or policy.steps, time_power or policy.time_power)


def time_grid(steps: int, device=None, *, power: int = 1) -> torch.Tensor:
    """(K+1,) times t_0 = 1 > t_1 > ... > t_K = 0 of the Euler chain, t_k = (1 - k/K)^p, with 1 - k/K computed as
    LeRobot does (1 + k * dt in double precision, then float32), so that on the uniform grid both samplers see
    bit-identical times; the last time is exactly 0."""
    return torch.tensor(_grid(steps, power), dtype=torch.float32, device=device)


def time_deltas(steps: int, power: int = 1) -> list[float]:
    """(K,) the Euler steps dt_k = t_{k+1} - t_k (negative; Python floats): all -1/K on the uniform grid, as
    LeRobot's sampler multiplies them."""
    if power == 1:
        return [-1.0 / steps] * steps
    grid = _grid(steps, power)
    return [after - before for before, after in zip(grid[:-1], grid[1:])]


def _grid(steps: int, power: int) -> list[float]:
    assert steps >= 1 and power >= 1, f"the grid needs K >= 1 and p >= 1, got {steps}, {power}"
    dt = -1.0 / steps
    return [(1.0 + k * dt) ** power for k in range(steps)] + [0.0]


def noise_schedule(start: float, end: float, steps: int) -> torch.Tensor:
    """(K,) noise sizes of the denoising chain's steps, geometric from `start` (first step) to `end` (last):
    the sizes span two orders of magnitude, and a linear ramp would leave the last steps almost as noisy as
    the middle ones."""
    if steps == 1:
        return torch.tensor([float(start)])
    ratio = torch.arange(steps, dtype=torch.float64) / (steps - 1)
    return (start * (end / start) ** ratio).float()


def denoise(policy: FlowPolicy, prefix: Any, start: torch.Tensor, sigmas: torch.Tensor | None = None,
            noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The Euler chain, the one implementation every sampler uses: from the chain's start x_0 (B, T, C), the chain
    (B, K+1, T, C) and each step's mean mu_k = x_k + dt_k * v(x_k, t_k), (B, K, T, C). Without `sigmas` it is the
    plain ODE (x_{k+1} = mu_k); with noise sizes `sigmas` (K,) or (K, C) and standard-normal draws `noise`
    (B, K, T, C), each step is the Gaussian transition x_{k+1} = mu_k + sigma_k * noise_k (ReinFlow)."""
    steps = policy.steps
    assert start.shape[1:] == (policy.chunk, policy.chain_dim), \
        f"x0 must be (B, {policy.chunk}, {policy.chain_dim}), got {tuple(start.shape)}"
    if sigmas is not None:
        assert noise is not None and noise.shape == (start.shape[0], steps, *start.shape[1:]), \
            "noisy sampling needs noise of shape (B, K, T, C)"
    times, deltas = time_grid(steps, start.device, power=policy.time_power), time_deltas(steps, policy.time_power)
    prefix = policy.prepare_chain(prefix)
    chain, means = [start], []
    for k in range(steps):
        x = chain[-1]
        mean = x + deltas[k] * policy.velocity(prefix, x, times[k].expand(x.shape[0]))
        means.append(mean)
        chain.append(mean if sigmas is None else mean + sigmas[k].to(x) * noise[:, k])
    return torch.stack(chain, dim=1), torch.stack(means, dim=1)


def start_of(policy: FlowPolicy, prefix: Any, draw: torch.Tensor) -> torch.Tensor:
    """The chain's start x_0 (B, T, C) from a standard-normal draw (B, T, C): mean + std * draw under the policy's
    start distribution (the draw itself for N(0, I))."""
    mean, std = policy.start_distribution(prefix)
    return mean.to(draw) + std.to(draw) * draw


def sample_chain(policy: FlowPolicy, prefix: Any, draw: torch.Tensor, sigmas: torch.Tensor | None = None,
                 noise: torch.Tensor | None = None) -> torch.Tensor:
    """The chain (B, K+1, T, C) from the start the standard-normal `draw` (B, T, C) gives under the policy's start
    distribution; `sigmas` and `noise` as in `denoise`."""
    return denoise(policy, prefix, start_of(policy, prefix, draw), sigmas, noise)[0]


def sample_chunk(policy: FlowPolicy, prefix: Any, draw: torch.Tensor) -> torch.Tensor:
    """Deterministic sampler: integrate the ODE from the start of `draw` (B, T, C) to the chain's end x_K (B, T, C)."""
    return sample_chain(policy, prefix, draw)[:, -1]


def standard_start(device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """N(0, I), the start every policy is trained with: mean 0 and spread 1 (scalars that broadcast)."""
    return torch.zeros((), device=device), torch.ones((), device=device)


def chunk_actions(policy: FlowPolicy, x: torch.Tensor) -> torch.Tensor:
    """The chain's end x_K (B, T, C) -> joint targets (B, T, A) in SO-101 units."""
    return policy.normalizer.unnormalize_action(x[..., :policy.action_dim])


def flow_times(rows: int, beta: float, generator: torch.Generator) -> torch.Tensor:
    """(rows,) flow times t = 0.001 + 0.999 * u ** (1 / beta), u uniform: Beta(beta, 1), kept off t = 0."""
    return 0.001 + 0.999 * torch.rand(rows, generator=generator) ** (1.0 / beta)


def flow_matching_errors(policy: FlowPolicy, prefix: Any, actions: torch.Tensor, noise: torch.Tensor,
                         t: torch.Tensor, anchor: tuple[FlowPolicy, float] | None = None) -> torch.Tensor:
    """(B, T, A) squared errors between v(x_t, t) and the target noise - action, for normalised actions (B, T, A)
    zero-padded to the chain's C dimensions, noise (B, T, C) and times t (B,); only the A action dimensions
    count. `anchor` (a reference policy reading the same prefix, weight w): the target becomes
    (noise - action + w v_ref(x_t, t)) / (1 + w), whose squared error is (error + w |v - v_ref|^2) / (1 + w) plus
    a term the policy does not change, so its gradient pulls the velocity towards the reference's at the same
    points (a proximity term, the flow's counterpart of a KL to a reference policy)."""
    actions = F.pad(actions, (0, noise.shape[-1] - actions.shape[-1]))
    weight = t[:, None, None]
    x_t = weight * noise + (1.0 - weight) * actions
    target = noise - actions
    if anchor is not None:
        reference, strength = anchor
        with torch.no_grad():
            target = (target + strength * reference.velocity(prefix, x_t, t)) / (1.0 + strength)
    return ((policy.velocity(prefix, x_t, t) - target) ** 2)[..., :policy.action_dim]


def flow_matching_loss(policy: FlowPolicy, prefix: Any, actions: torch.Tensor, noise: torch.Tensor,
                       t: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
    """The mean of `flow_matching_errors`; `pad` (B, T) marks steps past the episode's end, which do not count."""
    error = flow_matching_errors(policy, prefix, actions, noise, t)
    if pad is None:
        return error.mean()
    keep = (~pad).to(error)[:, :, None]
    return (error * keep).sum() / (keep.sum() * error.shape[-1]).clamp_min(1.0)


DECISION_ROWS = 8
"""Decisions are computed in blocks of exactly this many rows (`in_blocks`). On the CPU a row's result depends on
the batch size (PyTorch's matrix kernels change with it: on an AVX-512 machine a (128, 128) linear layer computes
a row of 4- and 7-row batches differently) but not on the row's position or the other rows' values; so with every
call the same size, a decision does not depend on what else is in its batch, and an episode's outcome does not
depend on `--envs`, the backend or a resume point (`tests/policy/test_base.py`). Eight because from there the
compact policy's cost per decision is flat (one thread: 35 ms for 1 row, 21.5 ms per row for 4, 18.4 for 8-32),
and 16 simulators (evaluation's default and the compact RL profile's) hand it groups of 8 on two cores (two groups
taking turns, or, deciding in the simulators' processes, one group per process)."""


def in_blocks(compute, *inputs, rows: int = DECISION_ROWS):
    """`compute(*inputs)` for batch-first inputs of B rows (tensors, lists, dicts of them, or None), run on
    blocks of exactly `rows` rows, the last padded by repeating its last row; the outputs' first B rows,
    concatenated (tensors, lists, tuples, dicts and dataclasses of them, or None)."""
    size = len(inputs[0]["task"] if isinstance(inputs[0], dict) else inputs[0])
    outputs = [compute(*(pad_rows(take_rows(value, start, start + rows), rows) for value in inputs))
               for start in range(0, size, rows)]
    return take_rows(concat_rows(outputs), 0, size)


def pad_rows(value, rows: int = DECISION_ROWS):
    """A batch-first tensor or list (a list holds rows), a dict or tuple of them, or None, with its last row
    repeated up to `rows` rows (unchanged when it has that many); the caller keeps the first B rows of whatever is
    computed from it."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {name: pad_rows(item, rows) for name, item in value.items()}
    if isinstance(value, tuple):
        return tuple(pad_rows(item, rows) for item in value)
    missing = rows - len(value)
    if missing <= 0:
        return value
    if isinstance(value, torch.Tensor):
        return torch.cat([value, value[-1:].expand(missing, *value.shape[1:])])
    return list(value) + [value[-1]] * missing


def cast_prefix(prefix: Any, dtype: torch.dtype) -> Any:
    """The prefix with its floating-point tensors in `dtype` (masks and indices untouched)."""
    if isinstance(prefix, torch.Tensor):
        return prefix.to(dtype) if prefix.is_floating_point() else prefix
    return {name: cast_prefix(value, dtype) for name, value in prefix.items()}


def take_rows(value, start: int, stop: int):
    """Rows start..stop-1 of a batch-first structure (see `in_blocks`)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {name: take_rows(item, start, stop) for name, item in value.items()}
    if isinstance(value, tuple):
        return tuple(take_rows(item, start, stop) for item in value)
    if is_dataclass(value):
        return replace(value, **{field.name: take_rows(getattr(value, field.name), start, stop)
                                 for field in fields(value)})
    return value[start:stop]


def concat_rows(parts: list):
    """Batch-first structures of the same shape, their rows concatenated (see `in_blocks`)."""
    first = parts[0]
    if first is None:
        return None
    if isinstance(first, torch.Tensor):
        return torch.cat(parts)
    if isinstance(first, dict):
        return {name: concat_rows([part[name] for part in parts]) for name in first}
    if isinstance(first, tuple):
        return tuple(concat_rows(list(items)) for items in zip(*parts))
    if is_dataclass(first):
        return replace(first, **{field.name: concat_rows([getattr(part, field.name) for part in parts])
                                 for field in fields(first)})
    return [row for part in parts for row in part]


def observation_batch(observations: list[dict], instructions: list[str]) -> dict[str, Any]:
    """Env observations (`pixels` HxWx3 uint8, `agent_pos` (6,)) -> a policy batch with LeRobot's names."""
    # np.stack copies into a writable array: observations from Ray's object store are read-only views
    def images(name):
        stacked = torch.from_numpy(np.stack([obs["pixels"][name] for obs in observations]))
        # contiguous: a channels-last batch takes other convolution kernels, whose last bits differ
        return stacked.permute(0, 3, 1, 2).contiguous().float() / 255.0

    return {"observation.images.front": images("front"), "observation.images.wrist": images("wrist"),
            "observation.state": torch.from_numpy(np.stack([obs["agent_pos"] for obs in observations])),
            "task": list(instructions)}


@dataclass
class Normalizer:
    """Per-joint mean/std normalisation of states and actions (from the dataset's statistics)."""

    state_mean: torch.Tensor
    state_std: torch.Tensor
    action_mean: torch.Tensor
    action_std: torch.Tensor

    MIN_STD = 1e-2
    """A joint that never moved in the data (std ~ 0) is scaled by this instead of blowing up."""

    @classmethod
    def from_stats(cls, stats: dict) -> "Normalizer":
        """From LeRobot-style stats: {"observation.state": {"mean", "std"}, "action": {"mean", "std"}}."""
        def pair(key):
            mean = torch.as_tensor(stats[key]["mean"], dtype=torch.float32).reshape(-1)
            std = torch.as_tensor(stats[key]["std"], dtype=torch.float32).reshape(-1).clamp_min(cls.MIN_STD)
            return mean, std

        state_mean, state_std = pair("observation.state")
        action_mean, action_std = pair("action")
        return cls(state_mean, state_std, action_mean, action_std)

    @classmethod
    def identity(cls, dim: int = ACTION_DIM) -> "Normalizer":
        zeros, ones = torch.zeros(dim), torch.ones(dim)
        return cls(zeros, ones, zeros.clone(), ones.clone())

    def to_dict(self) -> dict:
        return {name: getattr(self, name).tolist() for name in ("state_mean", "state_std", "action_mean",
                                                                 "action_std")}

    @classmethod
    def from_dict(cls, data: dict) -> "Normalizer":
        return cls(**{name: torch.tensor(values, dtype=torch.float32) for name, values in data.items()})

    def normalize_state(self, state: torch.Tensor) -> torch.Tensor:
        return (state - self.state_mean.to(state)) / self.state_std.to(state)

    def normalize_action(self, action: torch.Tensor) -> torch.Tensor:
        return (action - self.action_mean.to(action)) / self.action_std.to(action)

    def unnormalize_action(self, action: torch.Tensor) -> torch.Tensor:
        return action * self.action_std.to(action) + self.action_mean.to(action)
