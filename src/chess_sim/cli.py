"""`chess-sim <verb>`: parses and validates arguments, then calls one function per verb.

Bad input ends with one line on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import PROFILES, TEST_SEED, profile  # noqa: E402


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors, in our one-line form
        raise UsageError(message)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _seed(text: str) -> int:
    value = _non_negative(text.replace("_", ""))
    if value >= 2**63:
        raise argparse.ArgumentTypeError(f"seed too large: {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="chess-sim", description="SO-101 chess manipulation in MuJoCo.")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    scene = verbs.add_parser("scene", help="render a scene: both cameras and an overview, as one PNG")
    scene.add_argument("--seed", type=_seed, default=TEST_SEED)
    scene.add_argument("--index", type=_non_negative, default=0)
    scene.add_argument("--out", type=Path, default=Path("scene.png"))
    scene.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    scene.add_argument("--json", type=Path, help="write the scene's task as JSON here")

    expert = verbs.add_parser("expert", help="run the scripted expert; print an outcome table")
    expert.add_argument("--episodes", type=_positive, default=10)
    expert.add_argument("--seed", type=_seed, default=TEST_SEED)
    expert.add_argument("--workers", type=_positive, default=min(2, os.cpu_count() or 1))
    expert.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    expert.add_argument("--video", type=_non_negative, default=0, help="film the first K episodes")
    expert.add_argument("--out", type=Path, default=Path("runs/expert"),
                        help="folder for videos and episodes.csv")
    expert.add_argument("--json", type=Path, help="write the summary as JSON here")
    return parser


def cmd_scene(args: argparse.Namespace) -> dict:
    import numpy as np
    from PIL import Image

    from chess_sim.sim.env import ChessEnv

    _check_writable_file(args.out)
    env = ChessEnv(profile(args.profile))
    try:
        _, info = env.reset(seed=args.seed, options={"index": args.index})
        images = env.camera_images()
        images["overview"] = env.render_camera("overview")
    finally:
        env.close()
    strip = np.concatenate([images[name] for name in ("front", "wrist", "overview")], axis=1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(strip).save(args.out)
    print(f"{info['instruction']}  (seed {args.seed}, index {args.index}) -> {args.out}")
    return {key: info[key] for key in ("seed", "index", "instruction", "piece", "color", "from", "to", "fen")}


def cmd_expert(args: argparse.Namespace) -> dict:
    from chess_sim.sim.episodes import run_expert_episodes
    from chess_sim.summary import summarize
    from chess_sim.tables import outcome_table, write_csv

    rows = run_expert_episodes(profile(args.profile), args.seed, args.episodes, workers=args.workers,
                               video_dir=args.out / "videos", videos=args.video)
    summary = summarize(rows)
    write_csv(args.out / "episodes.csv", rows)
    print(outcome_table(summary))
    return summary


COMMANDS = {"scene": cmd_scene, "expert": cmd_expert}


def _check_writable_file(path: Path) -> None:
    if path.exists() and path.is_dir():
        raise UsageError(f"{path} is a directory; expected a file path")


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "json", None) is not None:
            _check_writable_file(args.json)
        summary = COMMANDS[args.verb](args)
        if getattr(args, "json", None) is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.json.with_name(f".{args.json.name}.tmp")
            tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
            tmp.replace(args.json)
        return 0
    except UsageError as error:
        print(f"chess-sim: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chess-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
