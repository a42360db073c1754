"""The configuration of what learns and what measures it: recording, the compact policy, imitation training,
evaluation, and RL fine-tuning as a tree (`RLConfig` = run + PPO + noise + start) with its named profiles."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from chess_sim.config.base import (ACTION_DIM, CHUNK, DENOISE_STEPS, RL_TRAIN_SEED, TEST_SEED, VALIDATION_SEED,
                                   at_least, require)



@dataclass(frozen=True)
class RecordConfig:
    """Expert demonstrations written as a LeRobot dataset (`chess-sim record`)."""

    recovery_fraction: float = 0.3
    """Share of episodes recorded with perturbed execution (DART-style recovery demonstrations): the arm
    executes the expert's target plus noise, while the recorded `action` stays the expert's command from the
    state it is in, so a policy sees how to come back from off-path states."""
    recovery_noise_deg: float = 2.0
    """Standard deviation of the execution noise on the five arm joints (the gripper is never perturbed)."""
    recovery_noise_corr: float = 0.8
    """Step-to-step correlation of that noise (AR(1)): correlated noise makes short detours, not jitter."""
    recovery_min_height: float = 0.05
    """Noise is applied only while the tool point is at least this high above the board (above every
    piece): perturbing grasps and releases themselves made half the episodes fail even at 0.5 degrees,
    while 2 degrees in free space still gave 15 of 16 successes, the rest of the path recovering."""
    keep_failures: bool = False
    """Save failed expert episodes too (they are always counted and reported)."""
    vcodec: str = "h264"
    """Video codec of the camera streams (LeRobot's encoder; h264 encodes faster than LeRobot's default AV1
    on this CPU and every LeRobot decoder reads it)."""
    vpreset: str = "ultrafast"
    """Encoder speed preset: rendering and encoding share two cores, so encoding must stay cheap."""

    def __post_init__(self):
        require(0 <= self.recovery_fraction <= 1, f"recovery_fraction must be in [0, 1], got {self.recovery_fraction}")
        require(0 <= self.recovery_noise_corr < 1,
                 f"recovery_noise_corr must be in [0, 1), got {self.recovery_noise_corr}")
        at_least(self, 0, "recovery_noise_deg", "recovery_min_height")


@dataclass(frozen=True)
class DaggerConfig:
    """DAgger recording (`chess-sim record --policy DIR`): a policy drives each scene, and from the states it
    visits the scripted expert takes over on a copy of the simulation; each takeover is recorded as one
    demonstration episode, labelled with the expert's own commands from that state."""

    round: int = 1
    """DAgger round, written to every episode's provenance (`meta/chess_sim.json`)."""
    branch_every: int = 1
    """The expert takes over at every N-th decision of the policy (1: before each executed chunk; counted in
    decisions, so a policy executing fewer actions per decision is branched from more often in time)."""
    branch_steps: int = 100
    """Control steps the expert runs per takeover (fewer when its episode ends first): two chunks of expert
    commands from the policy's state."""
    start_spread: float = 1.0
    """Spread of the policy's start noise x_0, drawn from each scene's own seed as evaluation draws it: 1 samples
    as trained, 0 drives with the chain from x_0 = 0 (noise-free)."""

    def __post_init__(self):
        at_least(self, 1, "round", "branch_every", "branch_steps")
        at_least(self, 0, "start_spread")


@dataclass(frozen=True)
class CompactConfig:
    """Architecture of the compact flow policy (`policy/compact.py`)."""

    image_size: int = 96
    """Camera images are resized to this square size before the conv encoder (96 -> 6 x 6 tokens)."""
    width: int = 128
    """Token width of the prefix and of the action expert."""
    layers: int = 4
    """Transformer layers of the action expert."""
    heads: int = 4
    """Attention heads."""
    chunk: int = CHUNK
    """T: actions per decision's chunk."""
    action_steps: int = 0
    """Actions of each chunk executed before the policy decides again (1..chunk; fewer: closed loop); 0: the
    whole chunk."""
    action_dim: int = ACTION_DIM
    """A: joints."""
    steps: int = DENOISE_STEPS
    """K: Euler steps of the sampler."""
    captures: int = 0
    """1: the instruction's captured piece is a fifth instruction token (`train --tasks captures` sets it); 0: quiet
    moves only (every policy from before captures)."""

    def __post_init__(self):
        for item in fields(self):  # also read from a policy's config.json, where anything can stand
            value = getattr(self, item.name)
            require(isinstance(value, int) and not isinstance(value, bool),
                    f"{item.name} must be an integer, got {value!r}")
        at_least(self, 1, *(item.name for item in fields(self) if item.name not in ("action_steps", "captures")))
        at_least(self, 0, "action_steps")
        require(self.captures in (0, 1), f"captures must be 0 or 1, got {self.captures}")
        require(self.width % self.heads == 0, f"width {self.width} is not a multiple of heads {self.heads}")
        require(self.action_steps <= self.chunk, f"action_steps {self.action_steps} exceeds the chunk {self.chunk}")


@dataclass(frozen=True)
class TrainConfig:
    """Imitation training of a flow policy on a LeRobot dataset (`chess-sim train`)."""

    steps: int = 16_000
    """Optimizer steps (the baseline's recipe: 16,000 on 465 demonstrations, see models/baseline/MODEL_CARD.md)."""
    batch_size: int = 32
    """Samples (decisions) per step."""
    lr: float = 3e-4
    """Peak AdamW learning rate, reached after `warmup_steps` and decayed with a cosine to 0."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup_steps: int = 500
    """Linear warm-up of the learning rate."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    val_every: int = 8_000
    """Steps between validation rollouts (0: only at the end)."""
    val_episodes: int = 10
    """Validation scenes (validation seed, indices 0..N-1), the policy without noise."""
    save_every: int = 1_000
    """Steps between `last` checkpoints."""
    log_every: int = 50
    """Steps between training-loss lines (the mean over those steps) in `train_log.jsonl`."""
    loader_workers: int = 1
    """DataLoader processes decoding video frames."""
    cache_workers: int = 2
    """Processes decoding the frame cache: training has not begun yet, so every core can decode."""
    cache_frames: bool = True
    """Compact policy: decode every sample once (LeRobot's loader) into memory at the policy's image size and
    train from there (1.9 GB for 34k frames at 96 px; decoding otherwise costs as much as the step itself).
    SmolVLA always streams from the videos."""
    time_beta: float = 1.5
    """Flow times are drawn as t = 0.001 + 0.999 * u ** (1 / a), u uniform: Beta(a, 1), the distribution pi0 and
    SmolVLA train with (a = 1.5), which favours noisy times, where the chunk's overall motion is decided;
    1.0 is uniform."""
    seed: int = 0
    """Seeds batch order, noise and flow times."""
    torch_threads: int = 2
    """CPU threads of this process."""
    recovery: bool = True
    """Train on the recovery demonstrations too; False keeps only the clean expert episodes (the ablation in
    `models/baseline/MODEL_CARD.md`)."""
    ema: float = 0.0
    """Decay per step of an exponential moving average of the trained weights (`policy/average.py`): the steps move
    the live weights, validations and the saved policies (`best`, `last`) are the average; 0: no average."""

    def __post_init__(self):
        at_least(self, 1, "steps", "batch_size", "save_every", "log_every", "cache_workers", "torch_threads")
        at_least(self, 0, "lr", "weight_decay", "warmup_steps", "grad_clip", "val_every", "val_episodes",
                  "loader_workers")
        require(self.time_beta > 0, f"time_beta must be positive, got {self.time_beta}")
        require(0.0 <= self.ema < 1.0, f"ema must be at least 0 and below 1, got {self.ema}")


@dataclass(frozen=True)
class EvalConfig:
    """The evaluation protocol (`chess-sim eval`): scenes `(seed, 0..episodes-1)`, the policy batched across
    parallel simulators."""

    episodes: int = 100
    """Scenes evaluated, indices 0..N-1."""
    seed: int = TEST_SEED
    """Scene seed; the test seed by default."""
    envs: int = 16
    """Simulators, spread over one worker process per core; they take turns in two groups, the policy deciding
    for one group while the other simulates. Outcomes do not depend on it (decisions are batch-invariant)."""
    videos: int = 0
    """Film the first K episodes."""
    noise: tuple[float, float] | None = None
    """(sigma_start, sigma_end) of the stochastic ReinFlow sampler (`--noise` alone: `NoiseConfig`'s defaults);
    None: the deterministic ODE sampler."""
    start_spread: float = 1.0
    """Scales every start draw: x_0 = mean + std * s * draw under the policy's start distribution, a hand-set
    temperature on top of it (1: as the policy samples). The draws themselves stay those of the scene, so
    evaluations at different spreads are paired."""
    action_steps: int = 0
    """Actions of each chunk executed before the policy decides again; 0: as many as the policy's own
    `action_steps` says (saved with it). Fewer than the chunk: closed loop, deciding more often."""
    check_expert: bool = False
    """Also run the scripted expert on a copy of each scene's start, to mark scenes it cannot solve."""
    early_stop: bool = True
    """End an episode once its outcome is settled (a topple or a disturbed neighbour, which cannot be undone, or
    the piece dropped off the board): the same end, sooner. False runs every failing episode to the limit."""

    def __post_init__(self):
        at_least(self, 1, "episodes", "envs")
        at_least(self, 0, "videos", "action_steps")
        require(self.start_spread > 0, f"start_spread must be positive, got {self.start_spread}")
        require(self.noise is None or (len(self.noise) == 2 and min(self.noise) > 0),
                 f"noise must be two positive sizes (start, end), got {self.noise}")


RATIOS = ("element", "step", "chunk")
"""Clipped-ratio granularities of PPO (`PPOConfig.ratio`)."""
Ratio = Literal["element", "step", "chunk"]
LIKELIHOODS = ("chain", "flow")
"""What PPO's ratios compare (`PPOConfig.likelihood`)."""
Likelihood = Literal["chain", "flow"]


@dataclass(frozen=True)
class RunConfig:
    """What an RL run rolls out, validates and saves, and for how long."""

    iterations: int = 100
    """PPO iterations (each: a rollout of `episodes` episodes, then the update)."""
    minutes: float = 0.0
    """Wall-time budget: the iteration that ends past it is the last one (validated and saved); 0: none."""
    episodes: int = 100
    """Training episodes per iteration."""
    envs: int = 10
    """Simulators, spread over one worker process per core (or one Ray actor each); two groups take turns, the
    policy deciding for one while the other simulates: each policy batch holds about envs / 2 decisions."""
    train_seed: int = RL_TRAIN_SEED
    """Training scenes (train_seed, i); i continues across iterations, so no scene repeats. The default is not the
    demonstrations' seed."""
    val_seed: int = VALIDATION_SEED
    """Validation scenes (val_seed, 0..val_episodes-1), the same at every validation."""
    val_episodes: int = 60
    """Validation episodes: the noise-free policy from its start distribution's centre; an episode ends once its
    outcome is settled (the same end as run to the time limit, sooner)."""
    val_every: int = 5
    """Iterations between validations (also before the first update and after the last)."""
    save_every: int = 5
    """Iterations between `iter_XXXX` checkpoints (`last` is written every iteration)."""
    torch_threads: int = 2
    """CPU threads of the learner process (the simulators need the rest)."""
    seed: int = 0
    """Seeds the training noise, minibatch order and critic initialisation."""
    report_videos: int = 6
    """Episodes of the final validation kept as videos for the run's report (`report.html`)."""
    tensorboard: bool = False
    """Also log every iteration's scalars for TensorBoard (`OUT/tensorboard/`)."""
    action_steps: int = 0
    """Actions of each chunk executed before the policy decides again, in rollouts and validations, and saved with
    the run's policies; 0: as many as the policy's own `action_steps` says. `gamma` and `lam` stay per decision,
    so fewer actions per decision shorten their horizon in time."""

    def __post_init__(self):
        at_least(self, 1, "iterations", "episodes", "envs", "val_episodes", "val_every", "save_every",
                  "torch_threads")
        at_least(self, 0, "minutes", "report_videos", "action_steps")


@dataclass(frozen=True)
class PPOConfig:
    """The PPO update over decisions of one 50-step chunk (`rl/ppo.py`)."""

    gamma: float = 0.99
    """Discount per decision (one 50-step chunk)."""
    lam: float = 0.95
    """GAE lambda."""
    epochs: int = 2
    """PPO epochs per iteration."""
    minibatch: int = 16
    """Decisions per gradient step."""
    clip: float = 0.2
    """Ratio clip."""
    likelihood: Likelihood = "chain"
    """What the ratios compare. `chain`: the exact log-density of the noisy denoising chain (ReinFlow), one element
    per step x timestep x chain dimension. `flow`: the flow-matching surrogate of FPO (McAllister et al., 2025),
    one element per draw x timestep x joint, log-ratio = the element's flow-matching error before the update minus
    after it, for the executed chunk and `flow_draws` (noise, time) draws stored with each decision; the rollout
    then runs the noise-free chain and explores through the start's draw. Its gradient has no 1 / sigma score
    and carries 4-10 times the chain's signal per episode (`benchmarks/rl_group_signal.py`)."""
    flow_draws: int = 4
    """With `likelihood flow`: (noise, time) draws per decision; times ~ Beta(b, 1) at `TrainConfig.time_beta`'s
    default b, the distribution this project's policies are trained with."""
    push_away: bool = True
    """Decisions with a negative (normalised) advantage push the policy away from what they did; off: only the
    positive part of the advantages acts, so an update only pulls towards the better decisions (reward-weighted
    regression under PPO's clip)."""
    ratio: Ratio = "element"
    """Clipped-ratio granularity: every element (chain: step x timestep x joint; flow: draw x timestep x joint) on
    its own, or summed per step (draw) or per chunk (which one small update already pushes outside the clip range:
    `rl-check`)."""
    vf_coef: float = 0.5
    """Value-loss weight."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    target_kl: float = 0.02
    """Stop the epochs when the last epoch's mean per-element approximate KL exceeds this; 0: never."""
    lr: float = 3e-7
    """Learning rate of the policy's own weights, the velocity network and encoder (SmolVLA scale); 0 leaves them
    as they are."""
    critic_lr: float = 3e-4
    """Critic learning rate."""
    critic_warmup: int = 1
    """First iterations that train only the critic (policy, start and noise untouched)."""
    ema: float = 0.0
    """Decay per policy step of an exponential moving average of the policy's trained weights (`policy/average.py`):
    rollouts and updates use the live weights, validations and the saved policies the average, which keeps the
    updates' common direction and averages away their minibatch noise; 0: no average (the live weights are
    validated and saved)."""

    def __post_init__(self):
        at_least(self, 1, "epochs", "minibatch", "flow_draws")
        require(self.likelihood in LIKELIHOODS,
                f"likelihood must be one of {', '.join(LIKELIHOODS)}, got {self.likelihood!r}")
        at_least(self, 0, "gamma", "lam", "clip", "vf_coef", "max_grad_norm", "target_kl", "lr", "critic_lr",
                  "critic_warmup")
        require(self.ratio in RATIOS, f"ratio must be one of {', '.join(RATIOS)}, got {self.ratio!r}")
        require(0.0 <= self.ema < 1.0, f"ema must be at least 0 and below 1, got {self.ema}")


@dataclass(frozen=True)
class NoiseConfig:
    """ReinFlow noise in the denoising chain (`rl/flow_rl.py`)."""

    sigma_start: float = 0.2
    """Noise size of the first denoising step (normalised action units)."""
    sigma_end: float = 0.002
    """Noise size of the last denoising step; the sizes in between are geometric."""
    learn_sigma: bool = False
    """Learn the noise sizes (per step and joint) with their own learning rate."""
    sigma_lr: float = 3e-3
    """Learning rate of the noise sizes (with `learn_sigma`)."""

    def __post_init__(self):
        require(self.sigma_start > 0 and self.sigma_end > 0,
                 f"sigma_start and sigma_end must be positive, got {self.sigma_start} and {self.sigma_end}")
        at_least(self, 0, "sigma_lr")


START_SPREAD_BOUNDS = (0.05, 2.0)
"""A learned start's spread stays in this range (`policy/start.py`). The floor keeps the start's score bounded; the
ceiling is well above the 1 where training begins, since a clamp passes no gradient past its bound and a spread just
over it would be stuck there for good."""


@dataclass(frozen=True)
class StartConfig:
    """The learned start of the chain (`policy/start.py`): x_0 ~ N(0, s^2) with one spread s for every element, and a
    small head on the prefix features that adjusts log s per observation; latent-noise steering of the start's
    spread, a temperature. x_0 decides most outcomes of the baseline, and a narrower start alone lifts its success
    (docs/experiments.md)."""

    steer: bool = False
    """Learn the start's spread (any FlowPolicy); off: the chain starts from N(0, I) as the policy was trained."""
    initial_spread: float = 1.0
    """With `steer`: the spread a new start begins from (1: as the policy was trained); with `spread_lr` and
    `spread_head_lr` 0 it stays there, a hand-set temperature. A policy that brings its own start keeps it."""
    spread_lr: float = 3e-3
    """Learning rate of the shared log-spread."""
    spread_head_lr: float = 1e-4
    """Learning rate of the spread's per-observation head. Far below `spread_lr`: with Adam every one of the head's
    weights moves by about the learning rate per step, so its output moves by about the rate times its width."""
    spread_noise: float = 0.0
    """Spread exploration (with `steer`; without, it has nothing to explore): each decision draws its own log-spread, N(log s, tau^2) with this tau, and PPO learns the
    spread from those draws, which vary it far more than one x_0 of 300 elements varies its own norm (~4%); 0: the
    spread learns from x_0 alone. Validation and evaluation always start from the learned spread."""

    def __post_init__(self):
        at_least(self, 0, "spread_lr", "spread_head_lr", "spread_noise")
        low, high = START_SPREAD_BOUNDS
        require(low <= self.initial_spread <= high,
                f"initial_spread must be within [{low}, {high}] (a learned start's range), got {self.initial_spread}")


@dataclass(frozen=True)
class RLConfig:
    """RL fine-tuning (`chess-sim rl`): PPO over 50-step chunks with ReinFlow noise, by concern. The defaults are
    the seed's method for SmolVLA on a GPU (`RL_PROFILES["smolvla"]`); `RL_PROFILES["compact"]` sizes a run of the
    compact policy for two CPU cores."""

    run: RunConfig = field(default_factory=RunConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    start: StartConfig = field(default_factory=StartConfig)

    def __post_init__(self):
        learns_start = self.start.spread_lr > 0 or self.start.spread_head_lr > 0
        require(not (self.ppo.likelihood == "flow" and self.start.steer and self.start.spread_noise == 0
                     and learns_start),
                "the flow likelihood learns the start's spread only through spread exploration: give spread_noise > 0, "
                "or spread_lr 0 and spread_head_lr 0 for a fixed spread")

    def policy_lrs(self) -> dict[str, float]:
        """Learning rate of each of `FlowRL.policy_parameter_sets`."""
        return {"chain": self.ppo.lr, "start_spread": self.start.spread_lr, "spread_head": self.start.spread_head_lr}


RL_PROFILES: dict[str, RLConfig] = {
    "smolvla": RLConfig(),
    "compact": RLConfig(
        run=RunConfig(episodes=64, envs=16, torch_threads=1),
        ppo=PPOConfig(epochs=4, minibatch=32, lr=0.0, critic_warmup=2),
        noise=NoiseConfig(sigma_start=0.01, sigma_end=0.001),
        start=StartConfig(steer=True, spread_lr=1e-2, spread_noise=0.3)),
}
"""Named RL profiles. `compact` (the compact policy's default) sizes the run for two CPU cores and learns the start's
spread alone, explored per decision, leaving the velocity as it is (lr 0; a faint chain noise keeps every likelihood
exact): at the batch sizes two cores allow, the chain's gradient had no measurable signal (`benchmarks/rl_signal.py`),
while the start's spread decides much of the outcome (docs/experiments.md)."""
