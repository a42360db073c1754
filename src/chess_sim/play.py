"""`chess-sim play`: a game from a PGN file, move after move on one board, by the scripted expert or a policy.

Each ply is played as one or two tasks (`tasks.move_task`), each starting where the last one left the pieces and
the arm: its placements are read from the simulation, and the env goes on from its state
(`reset(options={"task", "assignment"})`). A quiet move is one task, a capture one task of two legs (the captured
piece into the capture area, then the mover), castling two tasks (the king, then the rook). Between plies a
captured piece is cleared from the capture area to its parking spot, as a helper at the table would, so the area
never fills. The scenes use the `captures` task profile's layout (the capture area, white's parked pieces beyond
it) and episode length. En passant and promotion are refused (not supported yet), before anything is played. A
failed ply stops the game, or with `on_failure="reset"` the board is set up afresh in the game's position after
that ply and the game goes on.

Writes `moves.csv` (one row per task: ply, move in SAN, instruction, end, seconds, placement error), `summary.json`
and, unless `video` is off, `game.mp4`: both cameras, every control step, the ply and instruction written above.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from pathlib import Path

import chess
import chess.pgn

from chess_sim import atomic
from chess_sim.config import CHUNK, ON_FAILURE, TEST_SEED, EvalConfig, profile
from chess_sim.eval import EXPERT
from chess_sim.report.tables import write_csv


class PlayError(Exception):
    """Bad input (a PGN file that holds no game, a ply outside it, a move not supported): one line for the CLI."""


def load_game(path: Path) -> tuple[chess.Board, list[chess.Move]]:
    """The first game of a PGN file: its starting position and its moves."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise PlayError(f"cannot read {path}: {error}") from None
    game = chess.pgn.read_game(io.StringIO(text))
    if game is None or game.errors:
        problem = game.errors[0] if game is not None and game.errors else "no game found"
        raise PlayError(f"{path} is not a readable PGN game ({problem})")
    moves = list(game.mainline_moves())
    if not moves:
        raise PlayError(f"{path} holds a game without moves")
    return game.board(), moves


def ply_parts(board: chess.Board, move: chess.Move, ply: int) -> list[tuple[chess.Board, chess.Move]]:
    """The moves one ply is played as, each with the position it starts from: the ply itself, or for castling the
    king's move and then the rook's; PlayError for en passant and promotion (not supported yet)."""
    if board.is_en_passant(move) or move.promotion is not None:
        what = "en passant" if board.is_en_passant(move) else "promotion"
        raise PlayError(f"ply {ply + 1} ({board.san(move)}): {what} is not supported yet")
    if not board.is_castling(move):
        return [(board, move)]
    rook_from, rook_to = _castling_rook(board, move)
    after_king = board.copy(stack=False)
    after_king.remove_piece_at(move.from_square)
    after_king.set_piece_at(move.to_square, board.piece_at(move.from_square))
    return [(board, chess.Move(move.from_square, move.to_square)), (after_king, chess.Move(rook_from, rook_to))]


def part_task(board: chess.Board, move: chess.Move, where: dict[str, tuple[float, float, float]], scene, ply: int,
              seed: int):
    """The task (`tasks.Task`) of one part of a ply, the pieces standing at `where` (square -> x, y, yaw)."""
    from chess_sim.sim.tasks import move_task

    return move_task(board, move, _placements(board, where), scene, seed, ply)


def _castling_rook(board: chess.Board, move: chess.Move) -> tuple[int, int]:
    rank = chess.square_rank(move.from_square)
    kingside = chess.square_file(move.to_square) > chess.square_file(move.from_square)
    return (chess.square(7, rank), chess.square(5, rank)) if kingside else (chess.square(0, rank),
                                                                             chess.square(3, rank))


def _placements(board: chess.Board, where: dict[str, tuple[float, float, float]]) -> tuple:
    from chess_sim.sim.tasks import PIECE_KINDS, Placement

    return tuple(Placement(square=chess.square_name(square), kind=PIECE_KINDS[piece.piece_type],
                           color="white" if piece.color == chess.WHITE else "black",
                           x=where[chess.square_name(square)][0], y=where[chess.square_name(square)][1],
                           yaw=where[chess.square_name(square)][2])
                 for square, piece in sorted(board.piece_map().items()))


def play(policy: str | Path, pgn: Path, out: Path, from_ply: int = 0, plies: int | None = None,
         on_failure: str = "stop", video: bool = True, env_profile: str = "baseline", seed: int = TEST_SEED,
         trust_remote_code: bool = False) -> tuple[dict, list[dict]]:
    """Play plies `from_ply` .. `from_ply + plies - 1` (all the rest by default) of the game in `pgn` with `policy`
    (a policy directory, or "expert"); returns the summary written to `out/summary.json` and the rows of
    `out/moves.csv`. `trust_remote_code`: a LeRobot checkpoint's processors may run code of their own."""
    from chess_sim.policy.loading import check_reads, load_evaluated
    from chess_sim.sim.env import ChessEnv
    from chess_sim.sim.expert import ExpertDriver

    if on_failure not in ON_FAILURE:
        raise PlayError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
    board, moves = load_game(pgn)
    if not 0 <= from_ply < len(moves):
        raise PlayError(f"--from-ply {from_ply}: the game has plies 0..{len(moves) - 1}")
    last = len(moves) if plies is None else min(len(moves), from_ply + plies)
    for move in moves[:from_ply]:
        board.push(move)
    probe, captures = board.copy(), False
    for ply in range(from_ply, last):  # refuse what cannot be played before playing anything
        ply_parts(probe, moves[ply], ply)
        captures = captures or probe.is_capture(moves[ply])
        probe.push(moves[ply])
    is_expert = str(policy) == EXPERT
    model = None
    if not is_expert:
        try:
            model = load_evaluated(policy, trust_remote_code)
            if captures:  # a policy for quiet moves plays a game's stretch without captures
                check_reads(model, "captures")
        except ValueError as error:
            raise PlayError(str(error)) from None
    env_cfg = replace(profile(env_profile, "captures"), early_stop=True, render=not is_expert)
    if model is not None and getattr(model, "image_size", None):
        from chess_sim.policy.base import observed_env

        env_cfg = observed_env(model, env_cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = ChessEnv(env_cfg)
    driver = ExpertDriver(env) if is_expert else None
    recorder = _video(out, env_cfg) if video else None
    rows, where, slots = [], _square_centres(board, env_cfg.scene), None
    try:
        for ply in range(from_ply, last):
            move = moves[ply]
            san = board.san(move)
            failed = False
            for part_board, part_move in ply_parts(board, move, ply):
                task = part_task(part_board, part_move, where, env_cfg.scene, ply, seed)
                options = {"task": task} if slots is None else {
                    "task": task, "assignment": [slots[p.square] for p in task.pieces]}
                observation, info = env.reset(options=options)
                if recorder is not None:
                    recorder.instruction = f"ply {ply + 1} {san}: {task.instruction}"
                    recorder.add(env.camera_images(), 0)
                info = _drive(env, driver, model, observation, info, recorder)
                rows.append({"ply": ply + 1, "move": san, "instruction": task.instruction, "end": info["end"],
                             "seconds": info["steps"] / env_cfg.physics.control_hz,
                             "place_error_mm": info["measurements"]["place_error_mm"]})
                if recorder is not None:
                    recorder.hold(info["end"])
                failed = info["end"] != "success"
                if failed:
                    break
                slots = _slots_after(env, task)
                where = _read_placements(env, slots)  # castling's rook starts where the king's move left things
            board.push(move)
            if failed and on_failure == "stop":
                break
            if failed:  # set the board up afresh in the game's position after this ply
                slots, where = None, _square_centres(board, env_cfg.scene)
    finally:
        if recorder is not None:
            recorder.close(f"{sum(r['end'] == 'success' for r in rows)} of {len(rows)} moves")
        env.close()
    summary = {"pgn": str(pgn), "policy": str(policy), "from_ply": from_ply, "plies": len({r["ply"] for r in rows}),
               "tasks": len(rows), "successes": sum(r["end"] == "success" for r in rows),
               "all_succeeded": bool(rows) and all(r["end"] == "success" for r in rows), "on_failure": on_failure}
    write_csv(out / "moves.csv", rows)
    atomic.write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary, rows


def _drive(env, driver, model, observation: dict, info: dict, recorder) -> dict:
    """One task to its end, by the expert or by the policy's decisions; the last step's info."""
    import torch

    from chess_sim.eval import decide

    generator = torch.Generator().manual_seed(info["torch_seed"])
    while True:
        film = recorder is not None
        if driver is not None:
            observation, _, terminated, truncated, info = driver.chunk(CHUNK, film=film)
        else:
            chunk = decide(model, [observation], [info["instruction"]], [generator], EvalConfig())[0]
            observation, _, terminated, truncated, info = env.step_chunk(chunk, film=film)
        if film:
            recorder.add_chunk(info)
        if terminated or truncated:
            return info


def _slots_after(env, task) -> dict[str, int]:
    """Square -> slot once the task is done: the mover on its square, a captured piece cleared to its parking spot."""
    from chess_sim.sim.scene import park_piece

    slots = {placement.square: slot for placement, slot in zip(task.pieces, env.assignment)}
    mover = slots.pop(task.from_square)
    if task.captured is not None:
        park_piece(env.scene, env.data, slots[task.to_square])
    slots[task.to_square] = mover
    return slots


def _read_placements(env, slots: dict[str, int]) -> dict[str, tuple[float, float, float]]:
    """Square -> (x, y, yaw) of the piece standing for it, as the simulation has it."""
    where = {}
    for square, slot in slots.items():
        body = env.scene.slots[slot].body
        rotation = env.data.xmat[body].reshape(3, 3)
        x, y, _ = env.data.xpos[body]
        where[square] = (float(x), float(y), math.atan2(rotation[1, 0], rotation[0, 0]))
    return where


def _square_centres(board: chess.Board, scene) -> dict[str, tuple[float, float, float]]:
    """Square -> (x, y, yaw) with every piece on its square's centre (knights facing the opponent)."""
    from chess_sim.sim.tasks import facing_yaw, square_center

    return {chess.square_name(square): (*square_center(chess.square_name(square), scene.board), facing_yaw(piece))
            for square, piece in board.piece_map().items()}


def _video(out: Path, env_cfg):
    from chess_sim.video import EpisodeVideo

    return EpisodeVideo(out / "game.mp4", "", fps=env_cfg.physics.control_hz)


def moves_table(rows: list[dict]) -> str:
    """The per-move outcome table printed by the CLI."""
    lines = [f"{'ply':>4}  {'move':<8} {'end':<10} {'s':>5}  instruction"]
    lines += [f"{r['ply']:>4}  {r['move']:<8} {r['end']:<10} {r['seconds']:5.1f}  {r['instruction']}" for r in rows]
    return "\n".join(lines)

