"""`chess-sim <verb>`: parses and validates arguments, then calls one function per verb.

Bad input ends with one line on stderr and exit code 2; output paths are checked before any work starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: a missing local file is an error, not a fetch

from chess_sim import atomic, cli_args  # noqa: E402
from chess_sim.cli_args import UsageError  # noqa: E402
from chess_sim.config import (ALGORITHMS, ON_FAILURE, POLICY_KINDS, PROFILES, RL_PROFILES,  # noqa: E402
                              START_SPREAD_BOUNDS, TASK_PROFILES, TEST_SEED, TRAIN_SEED, DaggerConfig, EvalConfig,
                              PPOConfig, RecordConfig, RLConfig, RLProfile, SceneConfig, TrainConfig, algorithm_fields,
                              profile)

RECORD_FLAGS = {"recovery_fraction": "recovery"}
EVAL_FLAGS = {"videos": "video"}


def build_parser() -> argparse.ArgumentParser:
    parser = cli_args.Parser(prog="chess-sim", description="SO-101 chess manipulation in MuJoCo.")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=cli_args.Parser)

    scene = verbs.add_parser("scene", help="render a scene: both cameras and an overview, as one PNG")
    scene.add_argument("--seed", type=cli_args.seed, default=TEST_SEED)
    scene.add_argument("--index", type=cli_args.non_negative, default=0)
    scene.add_argument("--out", type=Path, default=Path("scene.png"))
    scene.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    _add_tasks(scene)
    scene.add_argument("--json", type=Path, help="write the scene's task as JSON here")

    expert = verbs.add_parser("expert", help="run the scripted expert; print an outcome table")
    expert.add_argument("--episodes", type=cli_args.positive, default=10)
    expert.add_argument("--seed", type=cli_args.seed, default=TEST_SEED)
    expert.add_argument("--workers", type=cli_args.positive, default=min(2, os.cpu_count() or 1))
    expert.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    _add_tasks(expert)
    expert.add_argument("--video", type=cli_args.non_negative, default=0, help="film the first K episodes")
    expert.add_argument("--out", type=Path, default=Path("runs/expert"),
                        help="folder for videos and episodes.csv")
    expert.add_argument("--json", type=Path, help="write the summary as JSON here")

    record = verbs.add_parser("record", help="expert demonstrations (or DAgger takeovers) -> LeRobot dataset")
    record.add_argument("--episodes", type=cli_args.positive, help="scenes (seed, 0..N-1) to attempt")
    record.add_argument("--seed", type=cli_args.seed, default=TRAIN_SEED)
    record.add_argument("--out", type=Path, help="dataset directory (must be new or empty, unless --resume)")
    record.add_argument("--workers", type=cli_args.positive, default=min(2, os.cpu_count() or 1))
    record.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    _add_tasks(record)
    cli_args.add_config_flags(record, RecordConfig, rename=RECORD_FLAGS,
                              custom={"recovery_fraction": {"type": cli_args.fraction}})
    record.add_argument("--policy", type=Path, help="DAgger: this policy drives each scene and the expert's takeovers "
                        "from the states it visits are recorded (the takeover flags below)")
    takeovers = record.add_argument_group("DAgger (with --policy)", DaggerConfig.__doc__.split("\n\n")[0])
    cli_args.add_config_flags(takeovers, DaggerConfig, profiles={"default": DaggerConfig()})
    record.add_argument("--resume", action="store_true", help="continue an interrupted recording in --out")
    record.add_argument("--inspect", type=Path, metavar="DIR", help="describe an existing dataset instead")
    cli_args.add_backend(record)
    record.add_argument("--json", type=Path, help="write the summary as JSON here")

    train = verbs.add_parser("train", help="imitation training of a flow policy on a LeRobot dataset")
    train.add_argument("--dataset", type=Path, required=True, nargs="+", metavar="DIR",
                       help="one or more LeRobot datasets, trained on as one (demonstrations and DAgger rounds)")
    train.add_argument("--policy", choices=POLICY_KINDS, default="compact")
    train.add_argument("--init", type=Path, help="start from this policy directory (smolvla: required, a LeRobot "
                       "SmolVLA checkpoint such as a downloaded lerobot/smolvla_base)")
    train.add_argument("--out", type=Path, required=True)
    cli_args.add_config_flags(train, TrainConfig)
    _add_tasks(train, "the validation scenes' ")
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    train.add_argument("--json", type=Path, help="write the summary as JSON here")

    evaluation = verbs.add_parser("eval", help="evaluate a policy (or the expert) on fixed scenes")
    evaluation.add_argument("--policy", help="policy directory (chess-sim's, or any LeRobot policy's), or 'expert' for the scripted expert")
    evaluation.add_argument("--out", type=Path, help="output folder (new, or this evaluation's with --resume)")
    cli_args.add_config_flags(evaluation, EvalConfig, rename=EVAL_FLAGS, custom={"noise": {
        "type": cli_args.noise, "nargs": "?", "const": (PPOConfig.sigma_start, PPOConfig.sigma_end),
        "metavar": "START,END"}})
    evaluation.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    _add_tasks(evaluation)
    evaluation.add_argument("--resume", action="store_true", help="finish an interrupted evaluation in --out")
    evaluation.add_argument("--compare", nargs="+", type=Path, metavar="DIR",
                            help="paired comparison of evaluation folders instead: A B, or more for a table of "
                                 "each against the first (an ablation)")
    evaluation.add_argument("--json", type=Path, help="write the summary as JSON here")
    cli_args.add_backend(evaluation)
    cli_args.add_trust_remote_code(evaluation)

    temper = verbs.add_parser("temper", help="save a policy with a hand-set start spread, a sampling temperature that "
                                             "evaluation, DAgger and RL then use by default")
    temper.add_argument("--policy", type=Path, required=True, help="policy directory without a start of its own")
    temper.add_argument("--spread", type=float, required=True,
                        help=f"s: the chain starts from N(0, s^2) instead of N(0, I); within {list(START_SPREAD_BOUNDS)}")
    temper.add_argument("--out", type=Path, required=True, help="the tempered policy's directory (new)")
    temper.add_argument("--json", type=Path, help="write the summary as JSON here")

    rl = verbs.add_parser("rl", usage="chess-sim rl --policy POLICY --out OUT [options]", help="RL fine-tuning over action chunks: ReinFlow PPO or success-filtered flow "
                                     "matching")
    rl_check = verbs.add_parser("rl-check", usage="chess-sim rl-check --policy POLICY --out OUT [options]", help="the likelihood and determinism self-check on a short rollout")
    for command in (rl, rl_check):
        command.add_argument("--policy", type=Path, required=True, help="policy directory to fine-tune")
        command.add_argument("--out", type=Path, required=True)
        command.add_argument("--profile", choices=sorted(RL_PROFILES),
                             help="RL profile (default: compact for the compact policy, else smolvla); explicit "
                                  "flags win over it")
        command.add_argument("--env-profile", choices=sorted(PROFILES), default="baseline")
        _add_tasks(command)
        command.add_argument("--json", type=Path, help="write the summary as JSON here")
        cli_args.add_backend(command)
        cli_args.add_config_flags(command, RLProfile, profiles=RL_PROFILES)
    rl.add_argument("--resume", action="store_true", help="continue the run in --out from last/")
    rl.add_argument("--verbose", action=argparse.BooleanOptionalAction, default=False,
                    help="print every iteration's full log line (JSON) instead of a progress bar and one line per "
                         "validation [default: false]")

    play = verbs.add_parser("play", help="a game from a PGN file, move after move on one board: a per-move outcome "
                                         "table and one video")
    play.add_argument("--pgn", type=Path, required=True, help="the game (the file's first)")
    play.add_argument("--policy", required=True, help="policy directory, or 'expert' for the scripted expert")
    play.add_argument("--out", type=Path, required=True, help="folder for moves.csv, summary.json and game.mp4")
    play.add_argument("--from-ply", type=cli_args.non_negative, default=0, help="start after this many plies")
    play.add_argument("--plies", type=cli_args.positive, help="plies to play (default: the rest of the game)")
    play.add_argument("--on-failure", choices=ON_FAILURE, default="stop",
                      help="after a failed move: stop, or set the board up in the game's position and go on "
                           "[default: %(default)s]")
    play.add_argument("--video", action=argparse.BooleanOptionalAction, default=True,
                      help="write game.mp4 [default: true]")
    play.add_argument("--profile", choices=sorted(PROFILES), default="baseline")
    cli_args.add_trust_remote_code(play)
    play.add_argument("--json", type=Path, help="write the summary as JSON here")

    report = verbs.add_parser("report", help="one HTML page for a run: curves, comparisons, videos, arguments")
    report.add_argument("run", type=Path, help="an RL run, a training run or an evaluation directory")
    report.add_argument("--out", type=Path, help="the page (default RUN/report.html)")
    return parser


def _add_tasks(command: argparse.ArgumentParser, whose: str = "") -> None:
    command.add_argument("--tasks", choices=TASK_PROFILES, default=SceneConfig.tasks,
                         help=f"{whose}task profile: which moves scenes ask for [default: %(default)s]")


def _env(args: argparse.Namespace, name: str):
    """The environment profile `name` with the task profile `--tasks`."""
    return profile(name, args.tasks)


def cmd_scene(args: argparse.Namespace) -> dict:
    import numpy as np
    from PIL import Image

    from chess_sim.sim.env import ChessEnv

    atomic.check_writable(args.out)
    if args.out.suffix.lower() not in IMAGE_SUFFIXES:
        raise UsageError(f"--out {args.out}: expected an image file name ending in {', '.join(IMAGE_SUFFIXES)}")
    env = ChessEnv(_env(args, args.profile))
    try:
        _, info = env.reset(seed=args.seed, options={"index": args.index})
        images = env.camera_images()
        images["overview"] = env.render_camera("overview")
    finally:
        env.close()
    strip = np.concatenate([images[name] for name in ("front", "wrist", "overview")], axis=1)
    atomic.write_file(args.out, lambda tmp: Image.fromarray(strip).save(tmp, format=Image.registered_extensions()[
        args.out.suffix.lower()]))
    print(f"{info['instruction']}  (seed {args.seed}, index {args.index}) -> {args.out}")
    return {key: info[key] for key in ("seed", "index", "instruction", "piece", "color", "from", "to", "fen")}


def cmd_expert(args: argparse.Namespace) -> dict:
    from chess_sim.sim.episodes import run_expert_episodes
    from chess_sim.report.summary import summarize
    from chess_sim.report.tables import outcome_table, write_csv

    _check_output_dir(args.out)
    rows = run_expert_episodes(_env(args, args.profile), args.seed, args.episodes, workers=args.workers,
                               video_dir=args.out / "videos", videos=args.video)
    summary = summarize(rows)
    print(outcome_table(summary))
    write_csv(args.out / "episodes.csv", rows)
    return summary


def cmd_record(args: argparse.Namespace) -> dict:
    from chess_sim.data.record import RecordError, inspect, record

    try:
        if args.inspect is not None:
            summary = inspect(args.inspect)
            _print_inspection(summary)
            return summary
        if args.out is None:
            raise UsageError("record needs --out DIR (or --inspect DIR)")
        if args.episodes is None and not args.resume:
            raise UsageError("record needs --episodes N")
        _check_output_dir(args.out)
        _check_capacity(args.workers, args, "--workers")
        rec = cli_args.config_from_args(RecordConfig, args, rename=RECORD_FLAGS)
        summary = record(args.out, _env(args, args.profile), rec, args.seed, args.episodes or 0,
                         workers=args.workers, resume=args.resume, backend=cli_args.backend_of(args),
                         source=_dagger_of(args))
    except RecordError as error:
        raise UsageError(str(error)) from None
    print(f"saved {summary['episodes_saved']} episodes ({summary['episodes_failed']} expert failures not saved, "
          f"{summary['recovery_episodes']} recovery demonstrations) to {summary['dataset']}; "
          f"{summary['frames_per_s']:.1f} frames/s")
    if "policy_success" in summary:
        print(f"the driving policy solved {summary['policy_success']:.1%} of {summary['policy_scenes']} scenes")
    return summary


def _dagger_of(args: argparse.Namespace):
    """The DAgger recording `--policy` and the takeover flags ask for (None without --policy); the policy is
    opened here once, so a bad directory is refused before any simulator starts."""
    from chess_sim.imitation.dagger import Dagger
    from chess_sim.policy.loading import check_reads, load_policy

    if args.policy is None:
        if _flags_given(args, DaggerConfig):
            raise UsageError("the DAgger flags (--round, --branch-every, --branch-steps, --start-spread) need --policy")
        return None
    try:
        check_reads(load_policy(args.policy), args.tasks)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return Dagger(str(args.policy.resolve()), cli_args.config_from_args(DaggerConfig, args))


def _print_inspection(summary: dict) -> None:
    lines = [f"{summary['dataset']}: {summary['episodes']} episodes, {summary['frames']} frames at {summary['fps']} fps"
             f" ({'finished' if summary['finished'] else 'unfinished'} recording)",
             f"  pieces: {summary['pieces']}  recovery episodes: {summary['recovery_episodes']}"]
    lines += [f"  {key:<26} {feature['dtype']:<8} {tuple(feature['shape'])}"
              for key, feature in summary["features"].items()]
    lines += [f"  {key} mean {stats.get('mean')}  std {stats.get('std')}" for key, stats in summary["stats"].items()]
    lines.append(f"  {len(summary['instructions'])} instructions, e.g. {summary['instructions'][:3]}")
    _print_report("\n".join(lines))


def cmd_train(args: argparse.Namespace) -> dict:
    from chess_sim.imitation.bc import train
    from chess_sim.runs import RunError

    _check_output_dir(args.out)
    cfg = cli_args.config_from_args(TrainConfig, args)
    try:
        summary = train(args.dataset, args.out, cfg, init=args.init, resume=args.resume, policy_kind=args.policy,
                        env_cfg=_env(args, "baseline"))
    except (RunError, ValueError) as error:
        raise UsageError(str(error)) from None
    if summary["final_loss"] is None:
        print(f"nothing to train: {args.out} is at step {summary['steps']} of {cfg.steps}; "
              f"best validation success {summary['best_val_success']}")
    else:
        print(f"trained {summary['steps']} steps ({summary['steps_per_s']:.2f} steps/s), final loss "
              f"{summary['final_loss']:.4f}, best validation success {summary['best_val_success']} -> {args.out}")
    return summary


def _print_report(text: str) -> None:
    """Print a report that a reader may cut short (`| head`): a closed pipe ends the printing quietly (stdout then
    points at /dev/null, so the interpreter's last flush cannot fail either)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def cmd_eval(args: argparse.Namespace) -> dict:
    from chess_sim.report.compare import CompareError, ablation_table, compare, compare_many, comparison_table
    from chess_sim.eval import EvalError, evaluate
    from chess_sim.report.tables import outcome_table

    if args.compare is not None:
        if len(args.compare) < 2:
            raise UsageError("--compare needs at least two evaluation folders")
        try:
            result = compare(*args.compare) if len(args.compare) == 2 else compare_many(args.compare)
        except CompareError as error:
            raise UsageError(str(error)) from None
        _print_report(comparison_table(result) if len(args.compare) == 2 else ablation_table(result))
        return result
    if args.policy is None or args.out is None:
        raise UsageError("eval needs --policy DIR|expert and --out DIR (or --compare A B [C ...])")
    _check_output_dir(args.out)
    cfg = cli_args.config_from_args(EvalConfig, args, rename=EVAL_FLAGS)
    _check_capacity(cfg.envs, args)
    try:
        summary, _, timing = evaluate(args.policy, args.out, cfg, _env(args, args.profile), resume=args.resume,
                                      backend=cli_args.backend_of(args), trust_remote_code=args.trust_remote_code)
    except EvalError as error:
        raise UsageError(str(error)) from None
    print(outcome_table(summary))
    if cfg.check_expert:
        print(f"  expert-solvable scenes {summary['expert_solvable']}, success on them "
              f"{100 * (summary['success_expert_solvable'] or 0):.1f}%")
    print(f"{cfg.episodes} episodes in {timing.total_s:.0f} s (policy {timing.policy_s:.0f} s, waiting for "
          f"simulators {timing.simulate_s:.0f} s) -> {args.out}")
    return summary


def _policy_kind(policy: Path) -> str | None:
    """The `kind` a chess-sim policy folder's config.json names (None for anything else: SmolVLA, unreadable)."""
    config = policy / "config.json"
    try:
        return json.loads(config.read_text()).get("kind") if config.is_file() else None
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, OSError):
        return None


def _rl_config(args: argparse.Namespace) -> tuple[str, RLConfig]:
    """The named profile (by default the policy's: compact for a compact policy, else smolvla), overridden by every
    flag given explicitly; (profile name, config)."""
    from chess_sim.policy.start import has_start

    name = args.profile
    if name is None:
        name = "compact" if _policy_kind(args.policy) == "compact" else "smolvla"
    chosen = cli_args.config_from_args(RLProfile, args, base=RL_PROFILES[name])
    for other in ALGORITHMS:
        given = [field for field in algorithm_fields(other) if getattr(args, field, None) is not None]
        if other != chosen.algorithm and given:
            raise UsageError(f"--{given[0].replace('_', '-')} is a setting of --algorithm {other}; this run's "
                             f"algorithm is {chosen.algorithm}")
    cfg = chosen.config()
    if args.spread_noise and not cfg.start.steer:  # a profile's exploration simply goes with its start
        raise UsageError(f"--spread-noise {args.spread_noise} needs a learned start (--steer)")
    if args.initial_spread is not None and not cfg.start.steer:
        raise UsageError(f"--initial-spread {args.initial_spread} needs a learned start (--steer)")
    if args.initial_spread is not None and has_start(args.policy):
        raise UsageError(f"--initial-spread {args.initial_spread} applies to a new start; {args.policy} brings its own")
    return name, cfg


def cmd_rl(args: argparse.Namespace) -> dict:
    from chess_sim.rl.runner import run
    from chess_sim.runs import RunError

    _check_output_dir(args.out)
    name, cfg = _rl_config(args)
    _check_capacity(cfg.run.envs, args)
    print(f"RL profile: {name}, algorithm {cfg.algorithm.name}"
          + (" (with the flags given)" if _flags_given(args, RLProfile) else ""))
    if name == "smolvla" and _policy_kind(args.policy) == "compact":
        print("note: the smolvla profile is sized for SmolVLA on a GPU; this policy is compact, whose own profile "
              "is --profile compact")
    try:
        return run(args.policy, args.out, cfg, _env(args, args.env_profile), resume=args.resume,
                   backend=cli_args.backend_of(args), profile_name=name, verbose=args.verbose)
    except RunError as error:
        raise UsageError(str(error)) from None


def cmd_temper(args: argparse.Namespace) -> dict:
    from chess_sim.policy.loading import load_policy
    from chess_sim.policy.start import with_spread

    _check_output_dir(args.out)
    if args.out.exists() and any(args.out.iterdir()):
        raise UsageError(f"--out {args.out} is not empty; the tempered policy goes to a new directory")
    try:
        tempered = with_spread(load_policy(args.policy), args.spread)
    except ValueError as error:
        raise UsageError(str(error)) from None
    tempered.save(args.out)
    print(f"{args.policy} with its chain starting from N(0, {args.spread:g}^2) -> {args.out}")
    return {"policy": str(args.policy), "spread": args.spread, "out": str(args.out)}


def cmd_rl_check(args: argparse.Namespace) -> dict:
    from chess_sim.rl.check import write_report
    from chess_sim.rl.runner import RLError, build, collect, training_env
    from chess_sim.sim.backends import make_vec_env

    _check_output_dir(args.out)
    _, cfg = _rl_config(args)
    _check_capacity(min(cfg.run.envs, cfg.run.episodes), args)
    try:
        algorithm = build(args.policy, cfg)
    except RLError as error:
        raise UsageError(str(error)) from None
    import torch

    generator = torch.Generator().manual_seed(cfg.run.seed)
    env_cfg = training_env(algorithm.model, _env(args, args.env_profile))
    with make_vec_env(min(cfg.run.envs, cfg.run.episodes), env_cfg, backend=cli_args.backend_of(args)) as vec:
        storage, _, _ = collect(algorithm, vec, cfg, 0, generator)
    result = algorithm.check(storage)
    write_report(result, args.out)
    _print_report((args.out / "check.md").read_text().strip())
    if not result["passed"]:
        raise UsageError(f"self-check failed; see {args.out / 'check.md'}")
    return result


def _flags_given(args: argparse.Namespace, cls) -> bool:
    return any(getattr(args, field.name, None) is not None for _, _, field in cli_args.leaf_fields(cls))


def cmd_play(args: argparse.Namespace) -> dict:
    from chess_sim.play import PlayError, moves_table, play

    _check_output_dir(args.out)
    try:
        summary, rows = play(args.policy, args.pgn, args.out, from_ply=args.from_ply, plies=args.plies,
                             on_failure=args.on_failure, video=args.video, env_profile=args.profile,
                             trust_remote_code=args.trust_remote_code)
    except PlayError as error:
        raise UsageError(str(error)) from None
    _print_report(moves_table(rows) + f"\n{summary['successes']} of {summary['tasks']} moves succeeded -> {args.out}")
    return summary


def cmd_report(args: argparse.Namespace) -> dict:
    from chess_sim.report.page import ReportError, build_report

    if args.out is not None:
        atomic.check_writable(args.out)
    try:
        page = build_report(args.run, args.out)
    except ReportError as error:
        raise UsageError(str(error)) from None
    print(f"report: {page}")
    return {"report": str(page)}


COMMANDS = {"scene": cmd_scene, "expert": cmd_expert, "record": cmd_record, "train": cmd_train, "eval": cmd_eval,
            "temper": cmd_temper, "rl": cmd_rl, "rl-check": cmd_rl_check,
            "play": cmd_play, "report": cmd_report}


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def _check_capacity(simulators: int, args: argparse.Namespace, flag: str = "--envs") -> None:
    """Local simulators must fit in this machine's memory (`sim.backends.check_capacity`): checked before any work."""
    from chess_sim.sim.backends import check_capacity

    if args.backend == "local" and args.ray_address is None:
        try:
            check_capacity(simulators)
        except ValueError as error:
            raise UsageError(f"{flag} {simulators}: {error}") from None


def _check_output_dir(path: Path) -> None:
    """An output folder must be a folder that can be written (it is created when missing): checked before any work."""
    try:
        atomic.check_writable(path, folder=True)
    except atomic.NotWritable as error:
        raise UsageError(f"--out {error}") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "json", None) is not None:
            atomic.check_writable(args.json)
        summary = COMMANDS[args.verb](args)
        if getattr(args, "json", None) is not None:
            atomic.write_text(args.json, json.dumps(summary, indent=2, sort_keys=True) + "\n")
        return 0
    except (UsageError, atomic.NotWritable) as error:
        print(f"chess-sim: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        # a disk that fills or turns read-only mid-run; what was complete was written atomically and stays
        where = f"{error.filename}: " if error.filename else ""
        print(f"chess-sim: error: {where}{error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chess-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
