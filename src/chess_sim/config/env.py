"""The simulator's configuration: scene, physics, cameras, judge, episode and reward, and the named environment
profiles. Units: metres, seconds, kilograms, degrees where named `_deg`, millimetres where named `_mm`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from chess_sim.config.base import at_least, require



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


TASK_PROFILES = ("pawn-knight", "all-pieces", "captures")
"""Which moves scenes ask for (`SceneConfig.tasks`, `--tasks`): `pawn-knight` (quiet pawn and knight moves, the
default since the seed), `all-pieces` (quiet moves of all six piece types) and `captures` (a capture by any piece:
the captured piece is set down in the capture area beside the board, then the mover on its square)."""
CAPTURE_EPISODE_FACTOR = 2.0
"""A capture is two pick-and-places: its episodes last this many times the profile's (`profile`)."""


@dataclass(frozen=True)
class SceneConfig:
    """What a scene contains and how it is randomised; `tasks.sample_task(seed, index, cfg)` reads it."""

    tasks: str = "pawn-knight"
    """The task profile (`TASK_PROFILES`): `pawn-knight` moves a pawn or a knight (a knight with probability
    `knight_fraction`); `all-pieces` draws the piece type uniformly among the types with a quiet move; `captures`
    draws the capturing piece's type uniformly among the types with a capture (not en passant, not promoting).
    Castling is not a quiet move here (it moves two pieces)."""
    capture_area: tuple[float, float, float, float] = (0.11, 0.31, -0.165, -0.125)
    """The capture area on the table beside the board's h-file (white's right), where a captured piece is set
    down: x from, x to, y from, y to. A strip along the board because the arm reaches a point on the table at only
    one or two approach tilts, which depend on its distance from the base (8-16 degrees at 0.27 m, 16-24 at 0.31 m):
    the expert sets the piece down where the tilt it picked it with reaches. Marked on the table, and the parked
    white pieces moved out of its way, in scenes of the `captures` profile only."""
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

    def __post_init__(self):
        require(self.tasks in TASK_PROFILES,
                f"unknown task profile {self.tasks!r}; known: {', '.join(TASK_PROFILES)}")


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
    them (the physics' cost with 32 pieces: docs/benchmarks.md)."""
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
    """Image width of both cameras, pixels: the rendered frames that datasets and videos keep."""
    height: int = 256
    """Image height of both cameras, pixels."""
    observation_size: int | None = None
    """Square size of the observation images; None: the frames themselves. Evaluation and RL set it to the
    policy's input size: the simulator renders smaller images and resizes them as the policy would (antialiased
    bilinear), so fewer pixels are rendered, sent and decoded."""
    def __post_init__(self):
        at_least(self, 1, "width", "height")
        if self.observation_size is not None:
            at_least(self, 1, "observation_size")


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
    """A piece whose base is within this of the surface it is set on (the board, or the table for a captured
    piece) stands on it."""
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


PROFILES: dict[str, EnvConfig] = {
    "baseline": EnvConfig(),
    "randomized": EnvConfig(scene=SceneConfig(randomize_visuals=True, offset_mm=3.0, yaw_deg=25.0)),
}
"""Named environment profiles: `baseline` (fixed visuals) and `randomized` (lighting, colours, cameras)."""


RETIRED_FIELDS: dict[str, dict[str, object]] = {"camera": {"observation_scale": None}}
"""Fields an EnvConfig once had, by section, with the value under which it behaved as today's config does: a saved
config holding exactly that value is today's config (`saved_as_today`); any other value stays a difference."""


def saved_as_today(saved: dict) -> dict:
    """A saved `asdict(EnvConfig)` as today's EnvConfig saves the same settings: the retired fields at their retired
    value left out, so that recordings and evaluations begun before a field was retired still resume."""
    today = dict(saved)
    for section, retired in RETIRED_FIELDS.items():
        if isinstance(today.get(section), dict):
            today[section] = {name: value for name, value in today[section].items()
                              if not (name in retired and value == retired[name])}
    return today


def profile(name: str, tasks: str | None = None) -> EnvConfig:
    """The named profile, with the task profile `tasks` when given; a ValueError lists the known names."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    chosen = PROFILES[name]
    if tasks is None:
        return chosen
    seconds = chosen.episode_seconds * (CAPTURE_EPISODE_FACTOR if tasks == "captures" else 1.0)
    return replace(chosen, episode_seconds=seconds, scene=replace(chosen.scene, tasks=tasks))
