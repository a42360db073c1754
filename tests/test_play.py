"""`chess-sim play`: a game's plies as tasks (quiet moves, captures, castling as two moves), bad input, and the
scripted expert playing a real opening on one board."""

import csv
import json
from pathlib import Path

import chess
import pytest

from chess_sim.cli import main
from chess_sim.config import SceneConfig
from chess_sim.play import PlayError, load_game, part_task, ply_parts

GAME = Path(__file__).parent / "games" / "ruy_lopez_exchange.pgn"
SCENE = SceneConfig(tasks="captures")


def centres(board):
    from chess_sim.sim.tasks import square_center

    return {chess.square_name(s): (*square_center(chess.square_name(s), SCENE.board), 0.0)
            for s in board.piece_map()}


def test_castling_is_the_king_then_the_rook_and_a_capture_is_one_task_of_two_legs():
    board = chess.Board("r1bqkbnr/1ppp1ppp/p1B5/4p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 0 4")
    capture = [part_task(*part, centres(part[0]), SCENE, 7, 1)
               for part in ply_parts(board, chess.Move.from_uci("d7c6"), 7)]
    assert [t.instruction for t in capture] == ["Capture the white bishop on c6 with the black pawn from d7."]
    assert len(capture[0].legs) == 2
    board.push_uci("d7c6")
    king, rook = [part_task(*part, centres(part[0]), SCENE, 8, 1)
                  for part in ply_parts(board, chess.Move.from_uci("e1g1"), 8)]
    assert (king.instruction, rook.instruction) == ("Move the white king from e1 to g1.",
                                                    "Move the white rook from h1 to f1.")
    assert "g1" in [p.square for p in rook.pieces] and "e1" not in [p.square for p in rook.pieces]


@pytest.mark.parametrize("fen, uci, words", [("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e5d6", "en passant"),
                                             ("4k3/P7/8/8/8/8/8/4K3 w - - 0 1", "a7a8q", "promotion")])
def test_en_passant_and_promotion_are_refused(fen, uci, words):
    board = chess.Board(fen)
    with pytest.raises(PlayError, match=f"{words} is not supported yet"):
        ply_parts(board, chess.Move.from_uci(uci), 0)


def test_a_game_loads_and_bad_files_are_refused(tmp_path):
    board, moves = load_game(GAME)
    assert board.fen() == chess.STARTING_FEN and len(moves) == 20
    (tmp_path / "empty.pgn").write_text("")
    (tmp_path / "bad.pgn").write_text("1. e4 e5 2. Ke3 *\n")
    for name, words in (("empty.pgn", "no game found"), ("bad.pgn", "not a readable PGN game"),
                        ("missing.pgn", "cannot read")):
        with pytest.raises(PlayError, match=words):
            load_game(tmp_path / name)


def test_play_on_the_cli_refuses_a_ply_outside_the_game(tmp_path, capsys):
    assert main(["play", "--pgn", str(GAME), "--policy", "expert", "--out", str(tmp_path / "o"),
                 "--from-ply", "20"]) == 2
    assert "the game has plies 0..19" in capsys.readouterr().err


@pytest.mark.slow
def test_the_expert_plays_captures_and_castling_on_one_board(tmp_path):
    """Plies 7-10 of the Exchange Ruy Lopez: Bxc6 dxc6 O-O f6 (two captures, castling as two moves)."""
    out = tmp_path / "game"
    assert main(["play", "--pgn", str(GAME), "--policy", "expert", "--out", str(out), "--from-ply", "6",
                 "--plies", "4", "--no-video", "--json", str(tmp_path / "s.json")]) == 0
    rows = list(csv.DictReader((out / "moves.csv").open()))
    assert [r["move"] for r in rows] == ["Bxc6", "dxc6", "O-O", "O-O", "f6"]
    assert all(r["end"] == "success" for r in rows), rows
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["all_succeeded"] and summary["plies"] == 4 and not (out / "game.mp4").exists()


@pytest.mark.slow
@pytest.mark.parametrize("on_failure, tasks", [("stop", 1), ("reset", 2)])
def test_after_a_failed_move_the_game_stops_or_goes_on_from_the_games_position(on_failure, tasks, tiny_policy_dir,
                                                                              tmp_path):
    out = tmp_path / on_failure
    assert main(["play", "--pgn", str(GAME), "--policy", str(tiny_policy_dir), "--out", str(out), "--plies", "2",
                 "--on-failure", on_failure, "--no-video"]) == 0
    rows = list(csv.DictReader((out / "moves.csv").open()))
    assert [r["move"] for r in rows] == ["e4", "e5"][:tasks] and all(r["end"] != "success" for r in rows)


def test_a_policy_without_captures_cannot_play_a_stretch_with_one(tiny_policy_dir, tmp_path, capsys):
    assert main(["play", "--pgn", str(GAME), "--policy", str(tiny_policy_dir), "--out", str(tmp_path / "o"),
                 "--from-ply", "6", "--plies", "1"]) == 2
    assert "reads no capture instructions" in capsys.readouterr().err
