"""The configuration of RL fine-tuning: `RLConfig` = run settings + start + optimiser + the chosen algorithm's own
config, and the named profiles (`RLProfile`) that give every default of a run in one place."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import ClassVar, Literal

from chess_sim.config.base import RL_TRAIN_SEED, VALIDATION_SEED, check_ranges, require

ALGORITHMS = ("ppo", "filtered")
"""RL algorithms (`rl/algorithms/`): `ppo`, ReinFlow's PPO over the noisy chain; `filtered`, success-filtered flow
matching."""
Algorithm = Literal["ppo", "filtered"]
CHAIN_DTYPES = ("float32", "bfloat16")
"""Floating-point precisions the chain of training rollouts may run in (`FilteredConfig.chain_dtype`)."""
ChainDtype = Literal["float32", "bfloat16"]


@dataclass(frozen=True)
class RunConfig:
    """What an RL run rolls out, validates and saves, and for how long."""

    iterations: int = 100
    """Iterations: each a rollout of `episodes` episodes, then an update."""
    minutes: float = 0.0
    """Wall-time budget: the iteration ending past it is the last; 0: none."""
    episodes: int = 100
    """Training episodes per iteration."""
    envs: int = 10
    """Simulators (one worker process per core, or one Ray actor each)."""
    policy_in_simulators: bool = False
    """Each simulator process decides with its own copy of the policy; off (and on Ray): this process decides (a
    policy too large to copy)."""
    train_seed: int = RL_TRAIN_SEED
    """Training scenes (train_seed, i), i continuing across iterations."""
    val_seed: int = VALIDATION_SEED
    """Validation scenes (val_seed, 0..val_episodes-1)."""
    val_episodes: int = 60
    """Validation episodes (noise-free policy)."""
    val_every: int = 5
    """Iterations between validations (also before the first and after the last)."""
    save_every: int = 5
    """Iterations between `iter_XXXX` checkpoints (`last`: every iteration)."""
    torch_threads: int = 2
    """CPU threads of the learner process."""
    seed: int = 0
    """Seed of the training draws, minibatch order and critic."""
    report_videos: int = 6
    """Videos of the final validation for `report.html`."""
    tensorboard: bool = False
    """Also log the scalars for TensorBoard (`OUT/tensorboard/`)."""
    action_steps: int = 0
    """Actions executed per chunk, saved with the policies; 0: the policy's own."""
    denoise_steps: int = 0
    """K: the chain's Euler steps, saved with the policies; 0: the policy's own."""
    time_power: int = 0
    """p of the time grid t_k = (1 - k/K)^p, saved with the policies; 0: the policy's."""

    RANGES: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("iterations", "episodes", "envs", "val_episodes", "val_every", "save_every",
                         "torch_threads"), "[1, inf)"),
        **dict.fromkeys(("minutes", "train_seed", "val_seed", "seed", "report_videos", "action_steps",
                         "denoise_steps", "time_power"), "[0, inf)")}

    def __post_init__(self):
        check_ranges(self)


START_SPREAD_BOUNDS = (0.05, 2.0)
"""A learned start's spread stays in this range (`policy/start.py`). The floor keeps the start's score bounded; the
ceiling is well above the 1 where training begins, since a clamp passes no gradient past its bound."""


@dataclass(frozen=True)
class StartConfig:
    """The chain's start x_0 ~ N(0, s^2) (`policy/start.py`). One spread s for every element, adjusted per
    observation by a small head on the prefix features; a policy that brings its own start keeps it."""

    steer: bool = False
    """Give the policy a start x_0 ~ N(0, s^2) of its own; off: N(0, I)."""
    initial_spread: float = 1.0
    """With `steer`: the spread s a new start begins from."""

    RANGES: ClassVar[dict[str, str]] = {"initial_spread": f"[{START_SPREAD_BOUNDS[0]}, {START_SPREAD_BOUNDS[1]}]"}

    def __post_init__(self):
        check_ranges(self)


@dataclass(frozen=True)
class OptimConfig:
    """What every algorithm's optimiser shares."""

    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    ema: float = 0.0
    """Decay per step of the weights' average, which validations and saved policies use; 0: none."""

    RANGES: ClassVar[dict[str, str]] = {"max_grad_norm": "(0, inf)", "ema": "[0, 1)"}

    def __post_init__(self):
        check_ranges(self)


@dataclass(frozen=True)
class PPOConfig:
    """ReinFlow PPO over 50-step chunks (`rl/algorithms/reinflow_ppo.py`). Gaussian noise in every denoising
    step, a per-element clipped ratio of the chain's exact log-density, a critic on the prefix features, GAE."""

    name: ClassVar[str] = "ppo"
    gamma: float = 0.99
    """Discount per decision (one chunk)."""
    lam: float = 0.95
    """GAE lambda."""
    epochs: int = 2
    """Passes over the iteration's decisions."""
    minibatch: int = 16
    """Decisions per gradient step."""
    clip: float = 0.2
    """Ratio clip, > 0."""
    push_away: bool = True
    """Negative advantages push the policy away; off: only positive ones act."""
    vf_coef: float = 0.5
    """Value-loss weight."""
    target_kl: float = 0.02
    """Stop the epochs once an epoch's mean approximate KL exceeds this; 0: never."""
    lr: float = 3e-7
    """Learning rate of the velocity network and encoder; 0: frozen."""
    critic_lr: float = 3e-4
    """Critic learning rate."""
    critic_warmup: int = 1
    """First iterations that train only the critic."""
    sigma_start: float = 0.2
    """Chain noise of the first step (normalised action units)."""
    sigma_end: float = 0.002
    """Chain noise of the last step; geometric in between."""
    spread_lr: float = 3e-3
    """With `steer`: learning rate of the start's log-spread."""
    spread_head_lr: float = 1e-4
    """With `steer`: learning rate of the spread's per-observation head."""
    spread_noise: float = 0.0
    """With `steer`: tau, each decision's log-spread ~ N(log s, tau^2); 0: none."""

    RANGES: ClassVar[dict[str, str]] = {
        "gamma": "[0, 1]", "lam": "[0, 1]", "clip": "(0, inf)", "sigma_start": "(0, inf)", "sigma_end": "(0, inf)",
        **dict.fromkeys(("epochs", "minibatch"), "[1, inf)"),
        **dict.fromkeys(("vf_coef", "target_kl", "lr", "critic_lr", "critic_warmup", "spread_lr", "spread_head_lr",
                         "spread_noise"), "[0, inf)")}

    def __post_init__(self):
        check_ranges(self)


@dataclass(frozen=True)
class FilteredConfig:
    """Success-filtered flow matching (`rl/algorithms/filtered.py`). Noise-free rollouts from N(0, I); each
    iteration fits the velocity network's flow-matching loss to the executed chunks of its successful episodes, at a
    learning rate that warms up and anneals to 0 within the iteration."""

    name: ClassVar[str] = "filtered"
    fit_lr: float = 1e-4
    """Peak learning rate of each iteration's fit."""
    fit_epochs: int = 8
    """Passes over the successful decisions per iteration."""
    fit_minibatch: int = 32
    """Decisions per Adam step."""
    fit_warmup: int = 20
    """Adam steps of each fit's linear warm-up to `fit_lr`."""
    fit_draws: int = 4
    """(noise, time) draws per decision and fit step."""
    fit_threads: int = 2
    """Torch threads of the fit."""
    anchor: float = 0.0
    """w of w |v - v_start|^2 at the fitted points (v_start: the start policy's)."""
    group_size: int = 1
    """K: rollouts per training scene; above 1 only the successes of scenes with mixed outcomes are fitted, each
    weighted by its leave-one-out advantage."""
    chain_dtype: ChainDtype = "float32"
    """Precision of the rollouts' chain; fits and validations are float32."""

    RANGES: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("fit_epochs", "fit_minibatch", "fit_draws", "fit_threads", "group_size"), "[1, inf)"),
        **dict.fromkeys(("fit_lr", "fit_warmup", "anchor"), "[0, inf)")}

    def __post_init__(self):
        check_ranges(self)
        require(self.chain_dtype in CHAIN_DTYPES,
                f"chain_dtype must be one of {', '.join(CHAIN_DTYPES)}, got {self.chain_dtype!r}")


ALGORITHM_CONFIGS: dict[str, type] = {"ppo": PPOConfig, "filtered": FilteredConfig}
"""Each algorithm's config class, by name."""


@dataclass(frozen=True)
class RLConfig:
    """One RL run (`chess-sim rl`): what it runs (`run`), the chain's start, the shared optimiser settings, and the
    chosen algorithm's own config (its `name` says which)."""

    run: RunConfig = field(default_factory=RunConfig)
    start: StartConfig = field(default_factory=StartConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    algorithm: PPOConfig | FilteredConfig = field(default_factory=PPOConfig)

    def __post_init__(self):
        require(type(self.algorithm) in ALGORITHM_CONFIGS.values(),
                f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")

    def as_dict(self) -> dict:
        """The tree as `args.json` keeps it: the algorithm's name, and its settings under that name."""
        from dataclasses import asdict

        return {"algorithm": self.algorithm.name, "run": asdict(self.run), "start": asdict(self.start),
                "optim": asdict(self.optim), self.algorithm.name: asdict(self.algorithm)}


@dataclass(frozen=True)
class RLProfile:
    """A named set of RL defaults: the run, start and optimiser settings, one config per algorithm, and the algorithm
    a run takes unless told otherwise. Its leaves are the `chess-sim rl` flags."""

    algorithm: Algorithm = "ppo"
    """`ppo`: ReinFlow PPO; `filtered`: success-filtered flow matching."""
    run: RunConfig = field(default_factory=RunConfig)
    start: StartConfig = field(default_factory=StartConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    filtered: FilteredConfig = field(default_factory=FilteredConfig)

    def __post_init__(self):
        require(self.algorithm in ALGORITHMS,
                f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")

    def config(self) -> RLConfig:
        """The run's config: the shared sections and the chosen algorithm's own."""
        return RLConfig(self.run, self.start, self.optim, getattr(self, self.algorithm))


def algorithm_fields(name: str) -> tuple[str, ...]:
    """The field names of algorithm `name`'s config (flags that only that algorithm reads)."""
    return tuple(item.name for item in fields(ALGORITHM_CONFIGS[name]))


_COMPACT = RLProfile(
    algorithm="filtered",
    run=RunConfig(episodes=512, envs=16, torch_threads=1, val_every=1, save_every=1, policy_in_simulators=True),
    start=StartConfig(steer=True, initial_spread=0.5),
    optim=OptimConfig(ema=0.999),
    filtered=FilteredConfig(anchor=0.25, chain_dtype="bfloat16"))

RL_PROFILES: dict[str, RLProfile] = {
    "smolvla": RLProfile(),
    "compact": _COMPACT,
    "main": replace(_COMPACT, run=replace(_COMPACT.run, iterations=3, minutes=12.0, episodes=224, val_episodes=20),
                    optim=replace(_COMPACT.optim, ema=0.0)),
}
"""Named RL profiles. `smolvla`: the seed's method (ReinFlow PPO) for SmolVLA on a GPU. `compact` (the compact
policy's default): sized for two CPU cores, success-filtered flow matching anchored to the start policy, the rollouts'
chain in bfloat16, the deployed policy the weights' average, at a hand-set start spread of 0.5 unless the policy
brings its own start. `main`: the README's main job (`scripts/main_job.sh`), `compact` for three iterations of 224
episodes, 20 validation episodes, no weight average, and a 12-minute guard against a much slower machine."""
