"""The configuration of RL fine-tuning as a tree (`RLConfig` = algorithm + run + PPO + noise + start + filtered) with
its named profiles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from chess_sim.config.base import RL_TRAIN_SEED, VALIDATION_SEED, at_least, require


RATIOS = ("element", "step", "chunk")
"""Clipped-ratio granularities of PPO (`PPOConfig.ratio`)."""
Ratio = Literal["element", "step", "chunk"]
ALGORITHMS = ("ppo", "filtered")
"""How an RL iteration updates the policy (`RLConfig.algorithm`)."""
Algorithm = Literal["ppo", "filtered"]
LIKELIHOODS = ("chain", "flow")
"""What PPO's ratios compare (`PPOConfig.likelihood`)."""
Likelihood = Literal["chain", "flow"]
CHAIN_DTYPES = ("float32", "bfloat16")
"""Floating-point precisions the chain of training rollouts may run in (`RunConfig.chain_dtype`)."""
ChainDtype = Literal["float32", "bfloat16"]


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
    policy deciding for one while the other simulates: each policy batch holds about envs / 2 decisions (with
    `policy_in_simulators`, each process decides for its own: envs / processes)."""
    policy_in_simulators: bool = False
    """Each simulator process holds a copy of the policy and decides for its own simulators in one batch (the draws
    still made here), so no process of the policy competes with the simulators for the cores: +2.8% decisions/s
    for the compact policy on two cores (docs/benchmarks.md); a batch then holds envs / processes decisions, best a
    multiple of `DECISION_ROWS` (8: 16 simulators on two cores). Off, and always on the Ray backend (one simulator
    per actor): this process decides, for each group of simulators in turn (also for a policy too large to copy
    into every process)."""
    chain_dtype: ChainDtype = "float32"
    """Precision of the chain's velocity calls in training rollouts (`policy/precision.py`): `bfloat16` takes ~30% off
    a compact decision's chain on a CPU with bfloat16 dot products; its actions differ from float32's by their
    rounding (`models/baseline` on 600 test scenes: 82.0% against 84.0%, 22 vs 34 discordant, p = 0.14;
    docs/benchmarks.md), so it needs an update that compares no likelihoods (algorithm `filtered`). Fits,
    validations and saved policies are float32 whatever it is."""
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
    denoise_steps: int = 0
    """K: Euler steps of the chain in rollouts, fits and validations, saved with the run's policies; 0: the
    policy's own."""
    time_power: int = 0
    """p of the chain's time grid t_k = (1 - k/K)^p (1: uniform; 2: small steps near the action end), saved with
    the run's policies; 0: the policy's own."""

    def __post_init__(self):
        at_least(self, 1, "iterations", "episodes", "envs", "val_episodes", "val_every", "save_every",
                  "torch_threads")
        at_least(self, 0, "minutes", "report_videos", "action_steps", "denoise_steps", "time_power")
        require(self.chain_dtype in CHAIN_DTYPES,
                f"chain_dtype must be one of {', '.join(CHAIN_DTYPES)}, got {self.chain_dtype!r}")


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
class FilteredConfig:
    """Success-filtered flow matching (`RLConfig.algorithm` `filtered`, `rl/filtered.py`): each iteration fits the
    velocity network's flow-matching loss to the executed chunks of the iteration's successful episodes, from fresh
    noise, with a learning rate that warms up and anneals to 0 within the iteration."""

    fit_lr: float = 1e-4
    """Peak learning rate of the velocity network in each iteration's fit (the encoders stay as they are: the fit
    reads the stored prefixes). Annealed to 0 within the iteration, so no minibatch's noise is left at full size."""
    fit_epochs: int = 8
    """Passes over the successful decisions per iteration."""
    fit_minibatch: int = 32
    """Decisions per Adam step."""
    fit_warmup: int = 20
    """Adam steps over which the learning rate rises linearly to `fit_lr` at the start of each iteration's fit."""
    fit_threads: int = 2
    """Torch threads of the fit. The simulators idle while it runs, so it may use every core (two threads fit ~1.6x
    faster than one here); the rollouts keep `torch_threads`, since a thread count changes a policy's last bits."""
    rollout_spread: float = 1.0
    """The training rollouts start the noise-free chain from N(0, s^2) with this s, whatever the policy's own start:
    the policy's successes at the spread it was trained with (1) are what it fits; validation and the saved policy
    use the policy's own start (a hand-set spread with `steer`)."""
    anchor: float = 0.0
    """Weight w of a proximity term in every fit: w |v - v_start|^2 at the same points (x_t, t) of the fitted chunks,
    v_start the velocity of the run's start policy, frozen. It ties the refitted policy to where the run began,
    the way a KL to a reference policy does, against the slow drift of repeated self-fits. 0: no term."""

    def __post_init__(self):
        at_least(self, 1, "fit_epochs", "fit_minibatch", "fit_threads")
        at_least(self, 0, "fit_lr", "fit_warmup", "anchor")
        require(self.rollout_spread > 0, f"rollout_spread must be positive, got {self.rollout_spread}")


@dataclass(frozen=True)
class RLConfig:
    """RL fine-tuning (`chess-sim rl`) by concern: PPO over 50-step chunks with ReinFlow noise, or success-filtered
    flow matching. The defaults are the seed's method for SmolVLA on a GPU (`RL_PROFILES["smolvla"]`);
    `RL_PROFILES["compact"]` sizes a run of the compact policy for two CPU cores."""

    algorithm: Algorithm = "ppo"
    """How each iteration updates the policy from its rollout. `ppo`: PPO's clipped update (`ppo`, `noise` and
    `start` settings). `filtered`: the flow-matching loss fitted to the chunks of the successful episodes
    (`filtered` settings; the rollout runs the noise-free chain, so it needs likelihood `flow`), a policy
    improvement step of reward-weighted regression with a 0/1 reward; the start, when steered, stays as set."""
    run: RunConfig = field(default_factory=RunConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    start: StartConfig = field(default_factory=StartConfig)
    filtered: FilteredConfig = field(default_factory=FilteredConfig)

    def __post_init__(self):
        require(self.algorithm in ALGORITHMS,
                f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        learns_start = self.start.spread_lr > 0 or self.start.spread_head_lr > 0
        require(not (self.ppo.likelihood == "flow" and self.start.steer and self.start.spread_noise == 0
                     and learns_start and self.algorithm == "ppo"),
                "the flow likelihood learns the start's spread only through spread exploration: give spread_noise > 0, "
                "or spread_lr 0 and spread_head_lr 0 for a fixed spread")
        if self.algorithm == "filtered":
            require(self.ppo.likelihood == "flow",
                    "algorithm filtered fits the chunks of the noise-free chain: it needs likelihood flow")
            require(not (self.start.steer and (learns_start or self.start.spread_noise > 0)),
                    "algorithm filtered keeps a steered start as set: give spread_lr 0, spread_head_lr 0 and "
                    "spread_noise 0")
        require(self.run.chain_dtype == "float32" or self.algorithm == "filtered",
                f"chain_dtype {self.run.chain_dtype} needs algorithm filtered (ppo compares the rollouts' likelihoods "
                f"with its float32 update's): give chain_dtype float32")

    def policy_lrs(self) -> dict[str, float]:
        """Learning rate of each of `FlowRL.policy_parameter_sets` (with `filtered`, each fit sets the chain's own)."""
        chain = self.filtered.fit_lr if self.algorithm == "filtered" else self.ppo.lr
        return {"chain": chain, "start_spread": self.start.spread_lr, "spread_head": self.start.spread_head_lr}


RL_PROFILES: dict[str, RLConfig] = {
    "smolvla": RLConfig(),
    "compact": RLConfig(
        algorithm="filtered",
        run=RunConfig(episodes=512, envs=16, torch_threads=1, val_every=1, save_every=1, policy_in_simulators=True,
                      chain_dtype="bfloat16"),
        ppo=PPOConfig(likelihood="flow", ema=0.999),
        start=StartConfig(steer=True, initial_spread=0.5, spread_lr=0.0, spread_head_lr=0.0),
        filtered=FilteredConfig(anchor=0.25)),
    "compact-spread": RLConfig(
        run=RunConfig(episodes=64, envs=16, torch_threads=1, policy_in_simulators=True),
        ppo=PPOConfig(epochs=4, minibatch=32, lr=0.0, critic_warmup=2),
        noise=NoiseConfig(sigma_start=0.01, sigma_end=0.001),
        start=StartConfig(steer=True, spread_lr=1e-2, spread_noise=0.3)),
}
"""Named RL profiles. `compact` (the compact policy's default) sizes a run for two CPU cores and trains the velocity
network by success-filtered flow matching: 512 noise-free rollouts per iteration from the start the policy was
trained with, the chunks of the successful ones fitted, each fit anchored to the start policy (weight 0.25, against
the drift of repeated self-fits), the policy deployed (validated, saved) as the average of its weights (decay 0.999
per Adam step) at a hand-set start spread of 0.5, the first baseline's best temperature (docs/experiments.md: +14.5
points over that temperature on the test scenes after 98 minutes, `models/rl`), or at the start the policy brings
(`models/baseline`'s, 0.5); the rollouts' chain runs in bfloat16 (`RunConfig.chain_dtype`). `compact-spread` is the
earlier compact profile: PPO learns the start's spread alone, explored per decision, leaving the velocity as it is
(lr 0; a faint chain noise keeps every likelihood exact), since at the batch sizes two cores allow the chain's
gradient had no measurable signal (`benchmarks/rl_signal.py`)."""
