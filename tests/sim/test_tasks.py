"""Scene sampling: geometry by hand, determinism, move legality, distributions and randomisation bounds."""

from __future__ import annotations

import dataclasses
import math

import chess
import pytest

from chess_sim.config import BoardConfig, SceneConfig
from chess_sim.sim.tasks import (DEFAULT_VISUALS, PIECE_KINDS, capture_text, instruction_text, parse_instruction,
                                 sample_task, square_center)

SEED = 7_700_003
CFG = SceneConfig()
TASKS = [sample_task(SEED, i, CFG) for i in range(200)]


def test_square_center_hand_values():
    b = BoardConfig()  # square 0.025, near edge 0.14
    assert square_center("a1", b) == pytest.approx((0.1525, 0.0875))
    assert square_center("h8", b) == pytest.approx((0.3275, -0.0875))
    assert square_center("e4", b) == pytest.approx((0.2275, -0.0125))


@pytest.mark.parametrize("bad", ["", "i1", "a0", "a9", "E4", "e44", " e4", "e"])
def test_bad_square_names_raise(bad):
    with pytest.raises(ValueError):
        square_center(bad, BoardConfig())


def test_deterministic_and_index_dependent():
    for i in range(5):
        assert sample_task(SEED, i, CFG) == TASKS[i]
    distinct = {(t.fen, t.move_uci) for t in TASKS[:20]}
    assert len(distinct) >= 15
    assert sample_task(SEED + 1, 0, CFG) != TASKS[0]


@pytest.mark.parametrize("task", TASKS[:100], ids=lambda t: str(t.index))
def test_move_is_legal_quiet_and_matches_description(task):
    board = chess.Board(task.fen)
    move = chess.Move.from_uci(task.move_uci)
    assert move in board.legal_moves
    assert not board.is_capture(move) and not board.is_en_passant(move)
    assert board.piece_at(move.to_square) is None
    assert move.promotion is None
    mover = board.piece_at(move.from_square)
    assert PIECE_KINDS[mover.piece_type] == task.piece in ("pawn", "knight")
    assert task.color == ("white" if board.turn == chess.WHITE else "black")
    assert mover.color == board.turn
    assert (task.from_square, task.to_square) == (task.move_uci[:2], task.move_uci[2:4])
    target = task.pieces[task.target]
    assert (target.square, target.kind, target.color) == (task.from_square, task.piece, task.color)
    assert task.goal_xy == square_center(task.to_square, CFG.board)


@pytest.mark.parametrize("task", TASKS[:20], ids=lambda t: str(t.index))
def test_placements_match_fen_in_square_order(task):
    board = chess.Board(task.fen)
    expected = [(chess.square_name(sq), PIECE_KINDS[p.piece_type], "white" if p.color else "black")
                for sq, p in sorted(board.piece_map().items())]
    assert [(p.square, p.kind, p.color) for p in task.pieces] == expected


def test_instruction_round_trip():
    assert instruction_text("white", "knight", "g1", "f3") == "Move the white knight from g1 to f3."
    for t in TASKS[:50]:
        assert parse_instruction(t.instruction) == (t.color, t.piece, t.from_square, t.to_square, None)
    assert capture_text("white", "knight", "d3", "c5", "bishop") == \
        "Capture the black bishop on c5 with the white knight from d3."
    assert parse_instruction("Capture the black bishop on c5 with the white knight from d3.") == \
        ("white", "knight", "d3", "c5", "bishop")
    for bad in ["Move the white knight from g1 to f3", "move the white knight from g1 to f3.",
                "Move the red knight from g1 to f3.", "Move the white knight from g9 to f3.", "",
                "Capture the white bishop on c5 with the white knight from d3."]:
        with pytest.raises(ValueError):
            parse_instruction(bad)
    with pytest.raises(ValueError):
        instruction_text("white", "knight", "z1", "f3")


def test_knight_share_and_both_colours():
    knights = sum(t.piece == "knight" for t in TASKS) / len(TASKS)
    assert 0.25 <= knights <= 0.55
    assert {t.color for t in TASKS} == {"white", "black"}
    assert {t.piece for t in TASKS} == {"pawn", "knight"}
    only_pawns = [sample_task(SEED, i, dataclasses.replace(CFG, knight_fraction=0.0)).piece for i in range(30)]
    assert only_pawns.count("knight") <= 3  # knights only when no quiet pawn move exists


ALL_PIECES = SceneConfig(tasks="all-pieces")


def test_all_pieces_moves_every_piece_type_quietly_and_keeps_the_default_scenes():
    tasks = [sample_task(SEED, i, ALL_PIECES) for i in range(200)]
    assert {t.piece for t in tasks} == set(PIECE_KINDS.values())
    for task in tasks:
        board = chess.Board(task.fen)
        move = chess.Move.from_uci(task.move_uci)
        assert move in board.legal_moves and not board.is_capture(move) and not board.is_castling(move)
        assert move.promotion is None and PIECE_KINDS[board.piece_type_at(move.from_square)] == task.piece
    # the opening comes from its own stream: the positions are the default profile's (unless that one had to play
    # on to find a pawn or knight move), only the move differs
    assert sum(a.fen == b.fen and a.pieces == b.pieces for a, b in zip(tasks, TASKS)) >= 190
    assert sample_task(SEED, 3, SceneConfig(tasks="pawn-knight")) == TASKS[3]


def test_captures_take_an_enemy_piece_in_two_legs():
    cfg = SceneConfig(tasks="captures")
    tasks = [sample_task(SEED, i, cfg) for i in range(100)]
    assert len({t.piece for t in tasks}) >= 4 and {t.captured for t in tasks} >= {"pawn", "knight", "bishop"}
    for task in tasks:
        board = chess.Board(task.fen)
        move = chess.Move.from_uci(task.move_uci)
        victim = board.piece_at(move.to_square)
        assert move in board.legal_moves and victim is not None and victim.color != board.turn
        assert PIECE_KINDS[victim.piece_type] == task.captured and move.promotion is None
        first, second = task.legs
        assert task.pieces[first.piece].square == task.to_square and first.area == cfg.capture_area
        assert cfg.capture_area[0] < first.goal_xy[0] < cfg.capture_area[1]
        assert (second.piece, second.goal_xy, second.area) == (task.target, task.goal_xy, None)
        assert parse_instruction(task.instruction) == (task.color, task.piece, task.from_square, task.to_square,
                                                       task.captured)
    assert all(t.captured is None and len(t.legs) == 1 for t in TASKS)


def test_an_unknown_task_profile_is_refused():
    with pytest.raises(ValueError, match="unknown task profile 'captures-everything'; known: pawn-knight"):
        SceneConfig(tasks="captures-everything")


def test_offsets_and_yaw_within_bounds():
    cfg = SceneConfig(offset_mm=3.0, yaw_deg=25.0)
    bound, yaw_bound = 3e-3 + 1e-12, math.radians(25.0) + 1e-12
    max_off = 0.0
    for i in range(30):
        task = sample_task(SEED, i, cfg)
        for p in task.pieces:
            cx, cy = square_center(p.square, cfg.board)
            assert abs(p.x - cx) <= bound and abs(p.y - cy) <= bound
            max_off = max(max_off, abs(p.x - cx), abs(p.y - cy))
            base = math.pi if (p.kind, p.color) == ("knight", "black") else 0.0
            assert abs(p.yaw - base) <= yaw_bound
    assert max_off > 2e-3  # offsets are actually applied, not all zero
    still = sample_task(SEED, 0, SceneConfig(offset_mm=0.0, yaw_deg=0.0))
    assert all((p.x, p.y) == square_center(p.square, CFG.board) and p.yaw in (0.0, math.pi) for p in still.pieces)


def test_visual_randomisation_changes_only_visuals():
    cfg = SceneConfig(randomize_visuals=True)
    assert all(t.visuals == DEFAULT_VISUALS for t in TASKS[:10])
    for base in TASKS[:10]:
        t = sample_task(SEED, base.index, cfg)
        assert t.visuals != DEFAULT_VISUALS
        assert (t.fen, t.move_uci, t.pieces, t.target, t.torch_seed) == (
            base.fen, base.move_uci, base.pieces, base.target, base.torch_seed)
        v = t.visuals
        assert all(abs(c) <= 0.3 for c in v.light_offset) and 0.6 <= v.light_intensity <= 1.3
        assert all(light > dark for light, dark in zip(v.board_light_rgb, v.board_dark_rgb))
        for name in ("board_light_rgb", "board_dark_rgb", "white_piece_rgb", "black_piece_rgb", "table_rgb"):
            for c, d in zip(getattr(v, name), getattr(DEFAULT_VISUALS, name)):
                assert 0.0 <= c <= 1.0 and abs(c - d) <= 0.08 + 1e-12
        for cam in (v.front_camera_offset, v.wrist_camera_offset):
            assert len(cam) == 6
            assert all(abs(c) <= cfg.camera_jitter_m for c in cam[:3])
            assert all(abs(c) <= cfg.camera_jitter_deg for c in cam[3:])


def test_torch_seed_range_and_variety():
    seeds = [t.torch_seed for t in TASKS]
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in seeds)
    assert len(set(seeds)) == len(seeds)
