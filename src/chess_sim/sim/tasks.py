"""Scene sampling: a task (position, move, piece placements, visuals) as a pure function of `(seed, index)`.

World frame: the robot's base axis is the origin, +x points away from the robot across the board, z up.
Ranks 1..8 run along +x from `BoardConfig.near_edge`; files a..h run along -y, so the a-file is on the
robot's left, as for a white player sitting at the robot.

Randomness comes only from numpy generators spawned from `SeedSequence([seed, index])`, one independent
child stream per concern (plies, move choice, placement offsets, visuals, torch seed). Changing how one
concern is randomised (e.g. turning on visual randomisation) therefore never changes the others.
This module deliberately imports neither torch nor mujoco so that tasks can be sampled anywhere cheaply.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import chess
import numpy as np

from chess_sim.config import BoardConfig, SceneConfig

PIECE_KINDS: dict[int, str] = {
    chess.PAWN: "pawn", chess.KNIGHT: "knight", chess.BISHOP: "bishop",
    chess.ROOK: "rook", chess.QUEEN: "queen", chess.KING: "king",
}
"""python-chess piece type -> the kind name used by the scene and in instructions."""

COLORS = ("white", "black")
PIECES = tuple(PIECE_KINDS.values())
"""Piece kinds in a fixed order (policies index their embeddings by it)."""
_MAX_RESTARTS = 1000
"""Bound on deterministic retries; a random game ending within a few dozen plies is rare, so this is never hit
in practice and exists only to turn a pathological config into an error instead of a hang."""


def square_center(square: str, board: BoardConfig) -> tuple[float, float]:
    """World (x, y) of the centre of `square` ("a1".."h8", lower case); ValueError on any other name."""
    if not isinstance(square, str) or square not in chess.SQUARE_NAMES:
        raise ValueError(f"not a square name: {square!r}")
    idx = chess.parse_square(square)
    f, r = chess.square_file(idx), chess.square_rank(idx)
    return board.near_edge + (r + 0.5) * board.square, (3.5 - f) * board.square


@dataclass(frozen=True)
class Placement:
    """One piece as placed in the world: its square, kind, colour and the pose of its axis."""

    square: str
    kind: str
    color: str
    x: float
    y: float
    yaw: float
    """Radians about +z. Knights face the opponent (white ~0, black ~pi); other pieces are near 0."""


@dataclass(frozen=True)
class Visuals:
    """Appearance of a scene; offsets are relative to the scene's defaults."""

    light_offset: tuple[float, float, float]
    light_intensity: float
    board_light_rgb: tuple[float, float, float]
    board_dark_rgb: tuple[float, float, float]
    white_piece_rgb: tuple[float, float, float]
    black_piece_rgb: tuple[float, float, float]
    table_rgb: tuple[float, float, float]
    front_camera_offset: tuple[float, ...]
    """(dx, dy, dz [m], droll, dpitch, dyaw [deg]): the shift in the world frame, the rotation about the
    camera's own axes."""
    wrist_camera_offset: tuple[float, ...]
    """Same, the shift in the gripper frame."""


DEFAULT_VISUALS = Visuals(
    light_offset=(0.0, 0.0, 0.0),
    light_intensity=1.0,
    board_light_rgb=(0.87, 0.72, 0.53),  # maple
    board_dark_rgb=(0.42, 0.27, 0.16),  # walnut
    white_piece_rgb=(0.93, 0.90, 0.82),  # ivory
    black_piece_rgb=(0.12, 0.11, 0.10),  # near-black
    table_rgb=(0.5, 0.5, 0.5),
    front_camera_offset=(0.0,) * 6,
    wrist_camera_offset=(0.0,) * 6,
)
"""Fixed appearance used unless `SceneConfig.randomize_visuals`."""

_COLOR_JITTER = 0.08
# Every channel of the light squares exceeds the dark one by > 2 * jitter, so jittered light squares stay lighter.
assert all(lo - hi > 2 * _COLOR_JITTER
           for lo, hi in zip(DEFAULT_VISUALS.board_light_rgb, DEFAULT_VISUALS.board_dark_rgb))


@dataclass(frozen=True)
class Leg:
    """One pick-and-place of a task: `Task.pieces[piece]` to `goal_xy` on the board, or for a captured piece
    anywhere in the capture area on the table."""

    piece: int
    goal_xy: tuple[float, float]
    """The goal square's centre (the capture area's centre for a captured piece)."""
    area: tuple[float, float, float, float] | None = None
    """For a captured piece, the capture area on the table (x from, x to, y from, y to): anywhere in it will do."""


@dataclass(frozen=True)
class Task:
    """A scene and the move to make in it; see `sample_task`."""

    seed: int
    index: int
    fen: str
    move_uci: str
    piece: str
    color: str
    from_square: str
    to_square: str
    instruction: str
    pieces: tuple[Placement, ...]
    """Every piece on the board, in square-index order a1, b1, ..., h8."""
    target: int
    """Index into `pieces` of the piece to move."""
    goal_xy: tuple[float, float]
    """Centre of `to_square`, without any offset."""
    visuals: Visuals
    torch_seed: int
    """In [0, 2**31), from its own stream, for seeding policy sampling of this episode."""
    captured: str | None
    """The kind of the piece the move captures (it stands on `to_square`), None for a quiet move."""
    legs: tuple[Leg, ...]
    """The pick-and-places in order: the captured piece to the capture area first, then the mover to its square."""


def instruction_text(color: str, piece: str, from_square: str, to_square: str) -> str:
    """The language instruction, e.g. "Move the white knight from g1 to f3."."""
    if color not in COLORS or piece not in PIECES:
        raise ValueError(f"bad colour or piece: {color!r} {piece!r}")
    for sq in (from_square, to_square):
        if sq not in chess.SQUARE_NAMES:
            raise ValueError(f"not a square name: {sq!r}")
    return f"Move the {color} {piece} from {from_square} to {to_square}."


def capture_text(color: str, piece: str, from_square: str, to_square: str, captured: str) -> str:
    """The instruction of a capture, e.g. "Capture the black bishop on c5 with the white knight from d3."."""
    instruction_text(color, piece, from_square, to_square)  # validates the names
    if captured not in PIECES:
        raise ValueError(f"bad captured piece: {captured!r}")
    return f"Capture the {_other(color)} {captured} on {to_square} with the {color} {piece} from {from_square}."


def _other(color: str) -> str:
    return COLORS[1 - COLORS.index(color)]


INSTRUCTION_GRAMMAR = ("Move the <colour> <piece> from <square> to <square>. | "
                       "Capture the <colour> <piece> on <square> with the <colour> <piece> from <square>.")
_COLOR, _PIECE = f"({'|'.join(COLORS)})", f"({'|'.join(PIECES)})"
_INSTRUCTION = re.compile(rf"Move the {_COLOR} {_PIECE} from ([a-h][1-8]) to ([a-h][1-8])\.")
_CAPTURE = re.compile(rf"Capture the {_COLOR} {_PIECE} on ([a-h][1-8]) with the {_COLOR} {_PIECE} from ([a-h][1-8])\.")


def parse_instruction(text: str) -> tuple[str, str, str, str, str | None]:
    """(color, piece, from_square, to_square, captured kind or None) of an `instruction_text` or `capture_text`
    string (the mover's colour and kind); ValueError otherwise, or for a capture of one's own colour."""
    text = text if isinstance(text, str) else ""
    if m := _INSTRUCTION.fullmatch(text):
        return m.group(1), m.group(2), m.group(3), m.group(4), None
    if (m := _CAPTURE.fullmatch(text)) and m.group(1) != m.group(4):
        return m.group(4), m.group(5), m.group(6), m.group(3), m.group(2)
    raise ValueError(f"instruction does not follow {INSTRUCTION_GRAMMAR!r}: {text!r}")


def _qualifying(board: chess.Board, piece_type: int) -> list[chess.Move]:
    """Legal quiet moves of `piece_type`: no capture (which also excludes en passant), no promotion, no castling."""
    moves = [m for m in board.legal_moves
             if board.piece_type_at(m.from_square) == piece_type
             and not board.is_capture(m) and m.promotion is None and not board.is_castling(m)]
    # Sorting makes the choice independent of python-chess's move-generation order.
    return sorted(moves, key=lambda m: m.uci())


def _random_ply(board: chess.Board, rng: np.random.Generator) -> bool:
    """Play one uniformly random legal move; False (move undone) if it ends the game."""
    moves = sorted(board.legal_moves, key=lambda m: m.uci())
    board.push(moves[int(rng.integers(len(moves)))])
    if board.is_game_over():
        board.pop()
        return False
    return True


def _play_opening(n: int, rng: np.random.Generator) -> chess.Board:
    """`n` random plies from the start; a game that ends restarts from the start with the same stream."""
    for _ in range(_MAX_RESTARTS):
        board = chess.Board()
        if all(_random_ply(board, rng) for _ in range(n)):
            return board
    raise RuntimeError(f"no {n}-ply random game without game over in {_MAX_RESTARTS} tries")


def _captures(board: chess.Board, piece_type: int) -> list[chess.Move]:
    """Legal captures by `piece_type` of a piece standing on the target square: no en passant, no promotion."""
    moves = [m for m in board.legal_moves
             if board.piece_type_at(m.from_square) == piece_type and board.piece_at(m.to_square) is not None
             and m.promotion is None]
    return sorted(moves, key=lambda m: m.uci())


def _candidates(board: chess.Board, cfg: SceneConfig, move_rng: np.random.Generator) -> list[chess.Move]:
    """The moves of the piece type the task profile draws (none: the position has no qualifying move)."""
    if cfg.tasks == "pawn-knight":
        first, second = ((chess.KNIGHT, chess.PAWN) if move_rng.random() < cfg.knight_fraction
                         else (chess.PAWN, chess.KNIGHT))
        return _qualifying(board, first) or _qualifying(board, second)
    of_type = _captures if cfg.tasks == "captures" else _qualifying
    by_type = [moves for piece_type in PIECE_KINDS if (moves := of_type(board, piece_type))]
    return by_type[int(move_rng.integers(len(by_type)))] if by_type else []


def _choose_move(board: chess.Board, cfg: SceneConfig, plies_rng: np.random.Generator,
                 move_rng: np.random.Generator) -> chess.Move:
    """The task move of the profile (`_candidates`: a quiet move or a capture); more random plies are played while
    none exists."""
    for _ in range(_MAX_RESTARTS):
        moves = _candidates(board, cfg, move_rng)
        if moves:
            return moves[int(move_rng.integers(len(moves)))]
        if not _random_ply(board, plies_rng):
            # That ply would end the game: restart the whole opening rather than search for another.
            board.set_fen(_play_opening(int(plies_rng.integers(cfg.min_plies, cfg.max_plies + 1)), plies_rng).fen())
    raise RuntimeError(f"no position with a move of the {cfg.tasks} profile found")


def facing_yaw(piece: chess.Piece) -> float:
    """A piece's yaw as set up on a real board: knights face the opponent (black's point toward the robot, pi),
    the other pieces 0."""
    return math.pi if piece.piece_type == chess.KNIGHT and piece.color == chess.BLACK else 0.0


def _uniform(rng: np.random.Generator, bound: float, n: int) -> tuple[float, ...]:
    return tuple(float(v) for v in rng.uniform(-bound, bound, n))


def _jitter_rgb(rng: np.random.Generator, rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = np.clip(np.asarray(rgb) + rng.uniform(-_COLOR_JITTER, _COLOR_JITTER, 3), 0.0, 1.0)
    return float(r), float(g), float(b)


def _sample_visuals(rng: np.random.Generator, cfg: SceneConfig) -> Visuals:
    d = DEFAULT_VISUALS
    lx, ly, lz = _uniform(rng, 0.3, 3)
    cameras = [_uniform(rng, cfg.camera_jitter_m, 3) + _uniform(rng, cfg.camera_jitter_deg, 3) for _ in range(2)]
    return Visuals(
        light_offset=(lx, ly, lz),
        light_intensity=float(rng.uniform(0.6, 1.3)),
        board_light_rgb=_jitter_rgb(rng, d.board_light_rgb),
        board_dark_rgb=_jitter_rgb(rng, d.board_dark_rgb),
        white_piece_rgb=_jitter_rgb(rng, d.white_piece_rgb),
        black_piece_rgb=_jitter_rgb(rng, d.black_piece_rgb),
        table_rgb=_jitter_rgb(rng, d.table_rgb),
        front_camera_offset=cameras[0],
        wrist_camera_offset=cameras[1],
    )


def sample_task(seed: int, index: int, cfg: SceneConfig) -> Task:
    """The task of scene `index` in the stream `seed`: equal arguments give an equal Task in any process.

    A random game of U[min_plies, max_plies] plies is played from the initial position, then the side to
    move makes a quiet (non-capturing, non-promoting, non-castling) move of a piece the task profile
    `cfg.tasks` draws: a pawn or a knight (a knight with probability `cfg.knight_fraction` when both are
    possible), or any piece type with a quiet move, uniformly; with `captures`, a capture by any piece type that
    has one, uniformly (its `legs`: the captured piece to `cfg.capture_area`, then the mover).
    """
    plies_ss, move_ss, place_ss, visual_ss, _ = np.random.SeedSequence([seed, index]).spawn(5)
    plies_rng, move_rng = np.random.default_rng(plies_ss), np.random.default_rng(move_ss)
    place_rng = np.random.default_rng(place_ss)

    board = _play_opening(int(plies_rng.integers(cfg.min_plies, cfg.max_plies + 1)), plies_rng)
    move = _choose_move(board, cfg, plies_rng, move_rng)

    occupied = [(sq, p) for sq in chess.SQUARES if (p := board.piece_at(sq)) is not None]
    # One row per piece, drawn in square order, so offsets depend only on the stream and the piece count.
    jitter = place_rng.uniform(-1.0, 1.0, (len(occupied), 3))
    offset, yaw_jitter = cfg.offset_mm / 1000.0, math.radians(cfg.yaw_deg)
    pieces = []
    for (sq, p), (ux, uy, uyaw) in zip(occupied, jitter):
        name = chess.square_name(sq)
        cx, cy = square_center(name, cfg.board)
        base_yaw = facing_yaw(p)
        pieces.append(Placement(
            square=name, kind=PIECE_KINDS[p.piece_type], color="white" if p.color == chess.WHITE else "black",
            x=cx + float(ux) * offset, y=cy + float(uy) * offset, yaw=base_yaw + float(uyaw) * yaw_jitter))

    visuals = _sample_visuals(np.random.default_rng(visual_ss), cfg) if cfg.randomize_visuals else DEFAULT_VISUALS
    return move_task(board, move, tuple(pieces), cfg, seed, index, visuals)


def move_task(board: chess.Board, move: chess.Move, pieces: tuple[Placement, ...], cfg: SceneConfig, seed: int,
              index: int, visuals: Visuals = DEFAULT_VISUALS) -> Task:
    """The task of making `move` (a quiet move or a capture of the piece on its target square) in the position
    `board`, its pieces standing as `pieces` (in square order); its torch seed comes from `(seed, index)`'s own
    stream (the fifth of `sample_task`'s)."""
    torch_ss = np.random.SeedSequence([seed, index]).spawn(5)[4]
    torch_seed = int(np.random.default_rng(torch_ss).integers(0, 2**31))
    mover = board.piece_at(move.from_square)
    from_sq, to_sq = chess.square_name(move.from_square), chess.square_name(move.to_square)
    color = "white" if mover.color == chess.WHITE else "black"
    piece = PIECE_KINDS[mover.piece_type]
    squares = [p.square for p in pieces]
    target, goal_xy = squares.index(from_sq), square_center(to_sq, cfg.board)
    legs = (Leg(target, goal_xy),)
    victim = board.piece_at(move.to_square)
    captured = None if victim is None else PIECE_KINDS[victim.piece_type]
    if captured is None:
        instruction = instruction_text(color, piece, from_sq, to_sq)
    else:
        instruction = capture_text(color, piece, from_sq, to_sq, captured)
        x0, x1, y0, y1 = cfg.capture_area
        legs = (Leg(squares.index(to_sq), ((x0 + x1) / 2, (y0 + y1) / 2), area=tuple(cfg.capture_area)), *legs)
    return Task(
        seed=seed, index=index, fen=board.fen(), move_uci=move.uci(), piece=piece, color=color,
        from_square=from_sq, to_square=to_sq, instruction=instruction, pieces=pieces, target=target,
        goal_xy=goal_xy, visuals=visuals, torch_seed=torch_seed, captured=captured, legs=legs,
    )
