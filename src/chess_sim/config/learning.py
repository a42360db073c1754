"""The configuration of what learns and what measures it: recording, the compact policy, imitation training and
evaluation. RL fine-tuning has its own module (`config/rl.py`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from chess_sim.config.base import ACTION_DIM, CHUNK, DENOISE_STEPS, TEST_SEED, check_ranges, require



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
    """Metres: noise is applied only while the tool point is at least this high above the board (above every
    piece), so grasps and releases run as planned and the perturbed stretches are in free space, where the rest of
    the path recovers (docs/benchmarks.md)."""
    keep_failures: bool = False
    """Save failed expert episodes too (they are always counted and reported)."""
    vcodec: str = "h264"
    """Video codec of the camera streams (LeRobot's encoder): h264, cheaper to encode on a CPU than LeRobot's
    default AV1, and read by every LeRobot decoder."""
    vpreset: str = "ultrafast"
    """Encoder speed preset: rendering and encoding share two cores, so encoding must stay cheap."""

    RANGES: ClassVar[dict[str, str]] = {"recovery_fraction": "[0, 1]", "recovery_noise_corr": "[0, 1)",
                                        "recovery_noise_deg": "[0, inf)", "recovery_min_height": "[0, inf)"}

    def __post_init__(self):
        check_ranges(self)


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
    """Scales the policy's start noise x_0, drawn from each scene's own seed as evaluation draws it: 1 samples as
    the policy does (at its own start spread, if it has one), 0 drives with the chain from x_0 = 0 (noise-free)."""

    RANGES: ClassVar[dict[str, str]] = {"round": "[1, inf)", "branch_every": "[1, inf)", "branch_steps": "[1, inf)",
                                        "start_spread": "[0, inf)"}

    def __post_init__(self):
        check_ranges(self)


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
    time_power: int = 1
    """p of the sampler's time grid t_k = (1 - k/K)^p: 1 is uniform (LeRobot's); 2 takes small steps near the
    action end (`policy/base.py`)."""
    captures: int = 0
    """1: the instruction's captured piece is a fifth instruction token (`train --tasks captures` sets it); 0: quiet
    moves only (every policy from before captures)."""

    RANGES: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("image_size", "width", "layers", "heads", "chunk", "action_dim", "steps", "time_power"),
                        "[1, inf)"),
        "action_steps": "[0, inf)", "captures": "[0, 1]"}

    def __post_init__(self):
        for item in fields(self):  # also read from a policy's config.json, where anything can stand
            value = getattr(self, item.name)
            require(isinstance(value, int) and not isinstance(value, bool),
                    f"{item.name} must be an integer, got {value!r}")
        check_ranges(self)
        require(self.width % self.heads == 0, f"width {self.width} is not a multiple of heads {self.heads}")
        require(self.action_steps <= self.chunk, f"action_steps {self.action_steps} exceeds the chunk {self.chunk}")


@dataclass(frozen=True)
class TrainConfig:
    """Imitation training of a flow policy on a LeRobot dataset (`chess-sim train`)."""

    steps: int = 32_000
    """Optimizer steps (the baseline's recipe, models/baseline/MODEL_CARD.md)."""
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
    train from there, so steps decode no video (`imitation/frame_cache.py`; memory and speed in docs/benchmarks.md).
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
    `models/baseline-bc/MODEL_CARD.md`)."""
    ema: float = 0.0
    """Decay per step of an exponential moving average of the trained weights (`policy/average.py`): the steps move
    the live weights, validations and the saved policies (`best`, `last`) are the average; 0: no average."""

    RANGES: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("steps", "batch_size", "save_every", "log_every", "cache_workers", "torch_threads"),
                        "[1, inf)"),
        **dict.fromkeys(("lr", "weight_decay", "warmup_steps", "grad_clip", "val_every", "val_episodes",
                         "loader_workers", "seed"), "[0, inf)"),
        "time_beta": "(0, inf)", "ema": "[0, 1)"}

    def __post_init__(self):
        check_ranges(self)


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
    """(sigma_start, sigma_end) of the stochastic ReinFlow sampler (`--noise` alone: `PPOConfig`'s defaults);
    None: the deterministic ODE sampler."""
    start_spread: float = 1.0
    """Scales every start draw: x_0 = mean + std * s * draw under the policy's start distribution, a hand-set
    temperature on top of it (1: as the policy samples). The draws themselves stay those of the scene, so
    evaluations at different spreads are paired."""
    action_steps: int = 0
    """Actions of each chunk executed before the policy decides again; 0: as many as the policy's own
    `action_steps` says (saved with it). Fewer than the chunk: closed loop, deciding more often."""
    denoise_steps: int = 0
    """K: Euler steps of the chain; 0: the policy's own (saved with it)."""
    time_power: int = 0
    """p of the chain's time grid t_k = (1 - k/K)^p (1: uniform; 2: small steps near the action end); 0: the
    policy's own (saved with it)."""
    check_expert: bool = False
    """Also run the scripted expert on a copy of each scene's start, to mark scenes it cannot solve."""
    early_stop: bool = True
    """End an episode once its outcome is settled (a topple or a disturbed neighbour, which cannot be undone, or
    the piece dropped off the board): the same end, sooner. False runs every failing episode to the limit."""

    RANGES: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("episodes", "envs"), "[1, inf)"),
        **dict.fromkeys(("seed", "videos", "action_steps", "denoise_steps", "time_power"), "[0, inf)"),
        "start_spread": "(0, inf)"}

    def __post_init__(self):
        check_ranges(self)
        require(self.noise is None or (len(self.noise) == 2 and min(self.noise) > 0),
                 f"noise must be two positive sizes (start, end), got {self.noise}")
