"""Frozen configuration dataclasses and named profiles.

Every knob has a docstring saying what it is and, for thresholds, why it has its value. Derived values
(substeps, steps per episode) are properties, computed in one place. Nothing here mutates a caller's config:
use `dataclasses.replace` to vary one.

Units: metres, seconds, kilograms, degrees where named `_deg`, millimetres where named `_mm`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRAIN_SEED = 7_700_003
VALIDATION_SEED = 9_300_003
TEST_SEED = 5_500_001

CHUNK = 50
"""T: control steps per decision (an action chunk)."""
ACTION_DIM = 6
"""A: joint targets per control step."""
DENOISE_STEPS = 10
"""K: Euler steps of a flow policy's denoising chain."""

JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
"""LeRobot SO-101 follower joint names; arm joints in degrees, gripper 0 (closed) to 100 (open)."""


@dataclass(frozen=True)
class BoardConfig:
    square: float = 0.025
    """Square side. 25 mm keeps all 64 centres within the SO-101's reach (0.15-0.34 m from the base)."""
    near_edge: float = 0.14
    """Distance from the arm's base axis to the board's near (rank-1) edge, along +x."""
    thickness: float = 0.006
    """Board thickness; the playing surface is at z = thickness."""
    friction: float = 0.5
    """Sliding friction piece-on-board (felt base on lacquered wood)."""


@dataclass(frozen=True)
class SceneConfig:
    """What a scene contains and how it is randomised; `tasks.sample_task(seed, index, cfg)` reads it."""

    min_plies: int = 0
    """Fewest random legal plies played from the initial position before the task move is chosen."""
    max_plies: int = 12
    """Most random plies; the count is drawn uniformly in [min_plies, max_plies]."""
    knight_fraction: float = 0.4
    """Probability that the task moves a knight (else a pawn), when the position allows both."""
    offset_mm: float = 2.0
    """Pieces stand up to this far off their square centre (uniform per axis); the task piece included."""
    yaw_deg: float = 15.0
    """Pieces are rotated about their axis by up to this much (uniform); knights face the opponent +- this."""
    randomize_visuals: bool = False
    """Randomise lighting, board and piece colours, and camera poses (the `randomized` profile)."""
    camera_jitter_m: float = 0.01
    """Camera position jitter when `randomize_visuals` (uniform per axis)."""
    camera_jitter_deg: float = 3.0
    """Camera orientation jitter when `randomize_visuals`."""
    board: BoardConfig = field(default_factory=BoardConfig)


@dataclass(frozen=True)
class PhysicsConfig:
    timestep: float = 1 / 600
    """Physics step. Knight placements missed by 5-10 mm at 1/300 s; 1/480 s or less holds a grasp."""
    control_hz: int = 30
    """Control rate: one action (joint targets) per 1/30 s, as LeRobot records the SO-101."""
    iterations: int = 20
    """Solver iterations (Newton); enough for the stiff fingertip contacts."""
    impratio: float = 10.0
    """Frictional-to-normal impedance ratio; a high value stops grasped pieces slipping."""
    sleep: bool = True
    """MuJoCo island sleeping: pieces at rest drop out of collision and solving until something touches
    them. 2.4x faster physics with 32 pieces and unchanged expert outcomes (measured on 6 scenes)."""
    gripper_force: float = 0.5
    """Gripper actuator force limit (N*m). Menagerie's 2.94 sinks soft jaws 3.4 mm into a 4 g pawn."""
    arm_kp: float = 998.22
    """Position gain of the arm actuators (Menagerie's robotstudio_so101)."""
    arm_kv: float = 2.731
    """Velocity gain of the arm actuators (Menagerie)."""
    arm_force: float = 2.94
    """Arm actuator force limit, N*m (Menagerie)."""

    @property
    def substeps(self) -> int:
        """Physics steps per control step."""
        return round(1.0 / (self.control_hz * self.timestep))


@dataclass(frozen=True)
class CameraConfig:
    width: int = 256
    """Image width of both cameras, pixels."""
    height: int = 256
    """Image height of both cameras, pixels."""


@dataclass(frozen=True)
class JudgeConfig:
    place_tolerance_mm: float = 6.0
    """A placed piece counts as on its square when its base centre is within this of the square centre
    (a quarter of the 25 mm square: clearly on the square, as a human player would accept)."""
    upright_deg: float = 15.0
    """A piece tilted more than this counts as toppled (a standing Staunton piece tilts < 2 degrees)."""
    topple_seconds: float = 0.3
    """A piece counts as toppled once tilted past `upright_deg` this long: a knocked piece that rocks back
    within a third of a second still stands."""
    disturb_mm: float = 3.0
    """A non-target piece that moved more than this from where it settled at reset was disturbed (well
    above the sub-millimetre creep of resting pieces, well below a push that would show on a real board)."""
    lift_mm: float = 20.0
    """`clean_lift`: the target rose at least this high with nothing else moved."""
    gripper_clear_mm: float = 10.0
    """Success requires the jaws at least this far from the placed piece (released and withdrawn)."""
    dropped_mm: float = 8.0
    """A released target still moving more than this above the board (falling), or off the board, was
    dropped."""
    resting_speed: float = 0.02
    """m/s: a piece slower than this is at rest (a settled piece moves < 1 mm/s)."""
    on_board_mm: float = 2.0
    """A piece whose base is within this of the board surface stands on the board."""
    unstable_speed: float = 5.0
    """A piece faster than this (m/s), or MuJoCo's bad-acceleration warning, means the simulation diverged:
    end `unstable` (pieces move < 1 m/s in any real episode)."""


@dataclass(frozen=True)
class EnvConfig:
    episode_seconds: float = 20.0
    """Episode length; the episode is truncated (end `timeout`) after this many seconds."""
    early_stop: bool = False
    """End the episode as soon as its outcome cannot change (training rollouts)."""
    render: bool = True
    """Render camera observations; off for physics-only rollouts and benchmarks."""
    scene: SceneConfig = field(default_factory=SceneConfig)
    physics: PhysicsConfig = field(default_factory=PhysicsConfig)
    camera: CameraConfig = field(default_factory=CameraConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)

    @property
    def max_steps(self) -> int:
        """Control steps per episode."""
        return round(self.episode_seconds * self.physics.control_hz)


@dataclass(frozen=True)
class RewardConfig:
    """Reward terms, each paid once per episode when its event first happens."""

    success: float = 1.0
    """The main term: the piece stands on its goal square, released, nothing else disturbed."""
    lift: float = 0.1
    """Shaping: the target was first lifted cleanly (>= `JudgeConfig.lift_mm`, nothing else moved)."""
    toppled: float = -0.2
    """Penalty: a piece tipped over."""
    disturbed: float = -0.2
    """Penalty: another piece was pushed more than `JudgeConfig.disturb_mm`."""


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
    """T: control steps per decision."""
    action_dim: int = ACTION_DIM
    """A: joints."""
    steps: int = DENOISE_STEPS
    """K: Euler steps of the sampler."""
    steering: bool = False
    """A learned start for the chain, x_0 ~ N(mean(prefix), diag(std^2)) (latent steering, `chess-sim rl --steer`);
    the mean starts at zero and the spread at 1, so a policy given steering first acts exactly as it did without."""
    start_spread: str = "joint"
    """With steering: `joint`, one spread per joint, `shared`, one for all joints, or `scene`, one for all joints
    that a small head on the prefix adjusts per observation (its last layer starts at zero)."""


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


BACKENDS = ("local", "ray")
"""Where simulators run (`sim.vec_env.make_vec_env`): worker processes on this machine, or Ray actors anywhere
in a cluster."""


@dataclass(frozen=True)
class EvalConfig:
    """The evaluation protocol (`chess-sim eval`): scenes `(seed, 0..episodes-1)`, the policy batched across
    parallel simulators."""

    episodes: int = 100
    """Scenes evaluated, indices 0..N-1."""
    seed: int = TEST_SEED
    """Scene seed; the test seed by default."""
    envs: int = 2
    """Simulators in worker processes; the policy decides for all of them in one batch. Outcomes are the
    same for the same `envs` (the batch composition, hence float rounding, depends on it)."""
    videos: int = 0
    """Film the first K episodes."""
    noise: tuple[float, float] | None = None
    """(sigma_start, sigma_end) of the stochastic ReinFlow sampler; None: the deterministic ODE sampler."""
    check_expert: bool = False
    """Also run the scripted expert on a copy of each scene's start, to mark scenes it cannot solve."""
    early_stop: bool = True
    """End an episode once its outcome is settled (a topple or a disturbed neighbour, which cannot be undone, or
    the piece dropped off the board): the same end, sooner. False runs every failing episode to the limit."""


@dataclass(frozen=True)
class RLConfig:
    """RL fine-tuning (`chess-sim rl`): PPO over 50-step chunks with ReinFlow noise. The defaults suit SmolVLA
    on a GPU; `RL_PROFILES["compact"]` suits the compact policy on two CPU cores."""

    iterations: int = 100
    """PPO iterations (each: a rollout of `episodes` episodes, then the update)."""
    minutes: float = 0.0
    """Wall-time budget: the iteration that ends past it is the last one (validated and saved); 0: none."""
    episodes: int = 100
    """Training episodes per iteration."""
    envs: int = 10
    """Parallel simulators (worker processes)."""
    train_seed: int = TRAIN_SEED
    """Training scenes (train_seed, i); i continues across iterations, so no scene repeats."""
    val_seed: int = VALIDATION_SEED
    """Validation scenes (val_seed, 0..val_episodes-1), the same at every validation."""
    val_episodes: int = 60
    """Validation episodes (noise-free policy, no early stop)."""
    val_every: int = 5
    """Iterations between validations (also before the first update and after the last)."""
    save_every: int = 5
    """Iterations between `iter_XXXX` checkpoints (`last` is written every iteration)."""
    sigma_start: float = 0.2
    """Noise size of the first denoising step (normalised action units)."""
    sigma_end: float = 0.002
    """Noise size of the last denoising step."""
    learn_sigma: bool = False
    """Learn `log_sigma` (per step and joint) with its own learning rate."""
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
    ratio: str = "element"
    """Clipped-ratio granularity: element (default) | step | chunk."""
    pg_sigma_min: float = 0.0
    """Denoising steps whose noise size (mean over the joints) is below this add no policy-gradient term; 0: every
    step does. A step's exact score grows as 1 / sigma while its noise moves the action by a hair, so the last
    steps of a 0.2 -> 0.002 chain carry nearly all of the gradient's noise and none of its measurable signal
    (`benchmarks/rl_signal.py`). Their exact log-probs still count in the KL that stops the epochs. The policy
    loss averages over the scored elements, so each weighs K / K' more than with every step scored."""
    vf_coef: float = 0.5
    """Value-loss weight."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    target_kl: float = 0.02
    """Stop the epochs when the last epoch's mean per-element approximate KL exceeds this."""
    lr: float = 3e-7
    """Policy learning rate (SmolVLA scale)."""
    critic_lr: float = 3e-4
    """Critic learning rate."""
    sigma_lr: float = 3e-3
    """Learning rate of `log_sigma` (with `learn_sigma`)."""
    steer: bool = False
    """Also learn where the chain starts (compact policy): x_0 ~ N(mean(prefix), diag(std^2)) instead of N(0, I),
    the mean from a small head on the prefix (zero at first) and a per-joint spread (1 at first): latent-noise
    steering, as in DSRL. x_0 decides most of an episode's outcome (the chain's noise little), and its score has
    unit scale; its log-probs join the chain's as row 0 of (B, K+1, T, A) and always score."""
    steer_lr: float = 1e-3
    """Learning rate of the steering head, the start's mean (with `steer`)."""
    spread_lr: float = 3e-3
    """Learning rate of the start's spread (with `steer`)."""
    spread: str = "joint"
    """The start's spread (with `steer`): `joint`, one per joint, `shared`, one for all joints, whose score sums
    the six joints' and so has sqrt(6) times the signal-to-noise ratio of each, or `scene`, a shared spread that
    a small head adjusts per observation (learning rate `spread_head_lr`)."""
    spread_head_lr: float = 1e-4
    """Learning rate of the `scene` spread's head. Far below `spread_lr`: with Adam, every one of the head's weights
    moves by about the learning rate per step, so its output moves by about the learning rate times its width."""
    spread_noise: float = 0.0
    """Spread exploration (with `steer`): each decision draws its own log-spread, N(log spread, tau^2) with this
    tau, and PPO learns the spread from those draws, which vary it far more than one x_0 of 300 elements varies
    its own norm (~4%); 0: the spread learns from x_0 alone. Validation always starts from the learned spread."""
    critic_warmup: int = 1
    """First iterations that train only the critic (policy and noise untouched)."""
    torch_threads: int = 2
    """CPU threads of the learner process (the simulators need the rest)."""
    seed: int = 0
    """Seeds the training noise, minibatch order and critic initialisation."""
    report_videos: int = 6
    """Episodes of the final validation kept as videos for the run's report (`report.html`)."""
    tensorboard: bool = False
    """Also log every iteration's scalars for TensorBoard (`OUT/tensorboard/`)."""

    def policy_lrs(self) -> dict[str, float]:
        """Learning rate of each of `FlowRL.policy_parameter_sets`."""
        return {"chain": self.lr, "start_mean": self.steer_lr, "start_spread": self.spread_lr,
                "spread_head": self.spread_head_lr}


RL_PROFILES: dict[str, RLConfig] = {
    "smolvla": RLConfig(),
    "compact": RLConfig(episodes=64, envs=2, val_episodes=60, val_every=5, minibatch=32, epochs=4, lr=0.0,
                        sigma_start=0.01, sigma_end=0.001, steer=True, steer_lr=0.0, spread="scene",
                        spread_lr=1e-2, spread_noise=0.3, critic_warmup=2, torch_threads=1),
}
"""Named RL profiles; `--profile compact` (the compact policy's default) sizes the run for two CPU cores. It
learns the start's spread alone, one for all joints with a small head's adjustment per observation, explored per
decision, and leaves the velocity and the start's mean as they are (lr 0; a faint chain noise keeps the
likelihood exact): at the batch sizes two cores allow, the chain's gradient had no measurable signal
(`benchmarks/rl_signal.py`), the mean head's 300 outputs drifted with the noise, and a spread learned from x_0
alone moved too slowly (~130 iterations to 0.55), while x_0's spread decides much of the outcome (README, RL
fine-tuning)."""


PROFILES: dict[str, EnvConfig] = {
    "baseline": EnvConfig(),
    "randomized": EnvConfig(scene=SceneConfig(randomize_visuals=True, offset_mm=3.0, yaw_deg=25.0)),
}
"""Named environment profiles: `baseline` (fixed visuals) and `randomized` (lighting, colours, cameras)."""


def profile(name: str) -> EnvConfig:
    """The named profile; a ValueError lists the known names."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    return PROFILES[name]

