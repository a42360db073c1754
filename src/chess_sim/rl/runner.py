"""The RL fine-tuning loop (`chess-sim rl`): rollout -> the algorithm's update -> validate -> checkpoint -> log.

The runner knows no algorithm by name: `cfg.algorithm` picks one of `rl.algorithms.ALGORITHM_CLASSES`, which says
how its rollouts run and updates the policy from them (`rl/algorithms/base.py`). Iteration 0 is the validation of
the starting policy; iterations 1..N each collect `episodes` training episodes (scenes `(train_seed, i)`, i
continuing across iterations) and update. Files in `out`:
- `args.json`: the profile, the RL config tree (`RLConfig.as_dict`), reward terms and environment of the run;
- `log.jsonl`: one line per iteration, see `ITERATION_KEYS` (printed whole with `verbose`; otherwise a progress bar
  and one short line per validation); `curves.png` (success vs iteration and vs wall time) and `report.html`
  (`chess_sim.report.page`), redrawn at each validation; the final validation keeps `report_videos` episode videos
  for the report; with `tensorboard`, the same scalars in `tensorboard/`;
- `check.json`, `check.md`: the self-check, run on the first rollout before the first update;
- `iter_XXXX/` every `save_every` iterations, `last/` every iteration, `best/` (best validation success, a later
  iteration wins ties): each a policy directory (`chess-sim eval --policy` loads it) plus `rl_state.pt`
  (the algorithm's state, RNG, next training scene), written atomically (`chess_sim.runs`); with a weight
  average (`OptimConfig.ema`) the directory's policy is the average and `rl_state.pt` also keeps the live weights;
- `val/iter_XXXX/`: each validation as an evaluation directory (`summary.json`, `episodes.csv`).
`resume` continues from `last/`: the log keeps exactly the iterations `last` had finished.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from chess_sim import jsonl, runs
from chess_sim.config import EnvConfig, EvalConfig, RewardConfig, RLConfig
from chess_sim.errors import first_line
from chess_sim.policy.average import WeightAverage, averaged
from chess_sim.policy.base import cast_prefix, observed_env
from chess_sim.policy.loading import check_reads
from chess_sim.report.summary import summarize
from chess_sim.rl.algorithms import ALGORITHM_CLASSES
from chess_sim.rl.algorithms.base import Algorithm
from chess_sim.rl.legacy import run_defining
from chess_sim.rl.storage import Storage, stack_prefixes

SUMMARY_KEYS = ("episodes", "success", "return", "clean_lift", "disturbed", "toppled", "success_pawn",
                "success_pawn_ci", "success_knight", "success_knight_ci", "close_mm_median", "ends")
"""The summary keys logged with `train_` / `val_` prefixes (docs/design.md)."""
ITERATION_KEYS = ("iteration", "decisions", "rollout_s", "rollout_parts", "update_s", "restarts", "elapsed_s")
"""An iteration's log keys besides the summaries and those of its algorithm's update (`Algorithm.log_keys`)."""
STATE_FILE = "rl_state.pt"
ARGS_FILE = "args.json"


class RLError(runs.RunError):
    """Bad input or a failed self-check (one-line message for the CLI)."""


def build(policy_dir: Path, cfg: RLConfig, start_dir: Path | None = None) -> Algorithm:
    """The run's algorithm around the policy in `policy_dir`; `start_dir`: where the run began (the start policy an
    algorithm may anchor to), `policy_dir` unless given."""
    start_dir = policy_dir if start_dir is None else start_dir

    def start_policy():
        try:
            return _load(start_dir, cfg)
        except (OSError, ValueError) as error:
            raise RLError(f"the run's start policy {start_dir} cannot be loaded: {error}") from None

    try:
        policy = _load(policy_dir, cfg)
        torch.manual_seed(cfg.run.seed)
        return ALGORITHM_CLASSES[cfg.algorithm.name](policy, cfg, start_policy)
    except ValueError as error:
        raise RLError(str(error)) from None


def _load(policy_dir: Path, cfg: RLConfig):
    """The policy saved in `policy_dir`, executing the run's `action_steps` of each chunk and sampling with its
    chain's steps and grid; ValueError (one line) as `load_policy`."""
    from chess_sim.policy.base import use_sampler
    from chess_sim.policy.loading import load_policy

    policy = load_policy(policy_dir)
    if cfg.run.action_steps:
        policy.set_action_steps(cfg.run.action_steps)
    use_sampler(policy, cfg.run.denoise_steps, cfg.run.time_power)
    return policy


def training_env(model, env_cfg: EnvConfig) -> EnvConfig:
    """The simulators of training rollouts: episodes end once their outcome is settled, and observations come at
    the policy's input size."""
    return observed_env(model.policy, replace(env_cfg, early_stop=True))


def collect(algorithm: Algorithm, vec, cfg: RLConfig, first_index: int, generator: torch.Generator, bar=None):
    """One iteration's rollout of `cfg.run.episodes` training episodes: (storage, episode rows, time parts)."""
    from chess_sim.rl.rollout import RolloutDriver
    from chess_sim.scheduler import drive

    storage = Storage()
    clock: dict = {}
    on_done = (lambda row: bar.advance()) if bar is not None else None
    driver = RolloutDriver(algorithm, generator, storage, on_done, in_simulators=cfg.run.policy_in_simulators)
    drive(vec, cfg.run.train_seed, algorithm.scenes(first_index, cfg.run.episodes), driver, clock=clock)
    parts = {**driver.parts, "env": clock["env"], "rounds": clock["rounds"]}
    return storage, driver.rows, parts


def run(policy_dir: Path, out: Path, cfg: RLConfig, env_cfg: EnvConfig, reward: RewardConfig | None = None,
        resume: bool = False, backend: str = "local", profile_name: str | None = None, verbose: bool = False) -> dict:
    """A whole run (or the rest of one), the simulators on `backend` (`config.BACKENDS`, the learner in
    this process); returns the final log line plus `best_val_success`."""
    from chess_sim.progress import Progress
    from chess_sim.rl.check import write_report
    from chess_sim.sim.backends import make_vec_env

    reward = reward or RewardConfig()
    out = Path(out)
    torch.set_num_threads(cfg.run.torch_threads)
    args = {"policy": str(policy_dir), "profile": profile_name, "rl": cfg.as_dict(), "reward": asdict(reward),
            "env": asdict(env_cfg)}
    continuing = runs.open_run(out, resume, STATE_FILE, ARGS_FILE)
    if resume:
        runs.check_same_args(out / ARGS_FILE, args, run_defining, "only --iterations and --minutes")
    start_dir = Path(json.loads((out / ARGS_FILE).read_text())["policy"]) if continuing else Path(policy_dir)
    # a continuing run starts from its own checkpoint, with the run's learned start (a start the policy brings is
    # kept); its policy directory holds the average, and the live weights come from the state
    algorithm = build(out / "last" if continuing else policy_dir, cfg, start_dir)
    model = algorithm.model
    try:
        check_reads(model.policy, env_cfg.scene.tasks)
    except ValueError as error:
        raise RLError(str(error)) from None
    generator = torch.Generator().manual_seed(cfg.run.seed)
    algorithm.generator = generator
    state = {"iteration": 0, "next_index": 0, "best": -1.0, "elapsed_s": 0.0}
    if continuing:
        state = _restore(out / "last", algorithm, generator)
        runs.trim_log(out / "log.jsonl", "iteration", state["iteration"])
    else:
        out.mkdir(parents=True, exist_ok=True)
        runs.write_args(out / ARGS_FILE, args)
        _checkpoint(out, "last", algorithm, generator, state)  # resumable from the first second
    train_env = training_env(model, env_cfg)
    scalars = _tensorboard(out) if cfg.run.tensorboard else None
    started = time.perf_counter() - state["elapsed_s"]
    line: dict = {}
    if not jsonl.read(out / "log.jsonl"):
        line = {"iteration": 0, **_validate(algorithm, out, 0, cfg, env_cfg, 0, backend),
                "elapsed_s": time.perf_counter() - started}
        state["best"] = line["val_success"]
        _log(out, line, algorithm, scalars, verbose)
        _checkpoint(out, "best", algorithm, generator, state)
    # Ctrl-C or a kill loses at most the iteration in progress: `last` is written after every iteration, after
    # its log line, so a resume repeats exactly that iteration (same scenes, draws and minibatch order).
    with make_vec_env(cfg.run.envs, train_env, reward=reward, backend=backend) as vec:
        while state["iteration"] < cfg.run.iterations:
            iteration = state["iteration"] + 1
            bar = Progress(cfg.run.episodes, f"iteration {iteration} rollout")
            began = time.perf_counter()
            storage, rows, parts = collect(algorithm, vec, cfg, state["next_index"], generator, bar)
            rollout_s = time.perf_counter() - began
            bar.close()
            if iteration == 1:
                result = algorithm.check(storage)
                write_report(result, out)
                if not result["passed"]:
                    raise RLError(f"self-check failed (see {out / 'check.md'}): {json.dumps(result)}")
            began = time.perf_counter()
            stats = algorithm.update(storage, rows, iteration)
            next_index = algorithm.scenes(state["next_index"], cfg.run.episodes)[-1] + 1
            state.update(iteration=iteration, next_index=next_index)
            line = {"iteration": iteration, "decisions": len(storage), "rollout_s": rollout_s,
                    "rollout_parts": parts, "update_s": time.perf_counter() - began,
                    **_start_spread(model, storage), **stats,
                    **_prefixed("train", summarize(rows)), "restarts": vec.restarts}
            out_of_time = cfg.run.minutes > 0 and time.perf_counter() - started >= 60 * cfg.run.minutes
            improved = False
            final = iteration == cfg.run.iterations or out_of_time
            if iteration % cfg.run.val_every == 0 or final:
                videos = cfg.run.report_videos if final else 0
                line.update(_validate(algorithm, out, iteration, cfg, env_cfg, videos, backend))
                improved = line["val_success"] >= state["best"]
                state["best"] = max(state["best"], line["val_success"])
            line["elapsed_s"] = state["elapsed_s"] = time.perf_counter() - started
            _log(out, line, algorithm, scalars, verbose)
            _checkpoint(out, "last", algorithm, generator, state)
            if improved:
                _checkpoint(out, "best", algorithm, generator, state)
            if iteration % cfg.run.save_every == 0:
                _checkpoint(out, f"iter_{iteration:04d}", algorithm, generator, state)
            if out_of_time:
                break
    if scalars is not None:
        scalars.close()
    return {**line, "best_val_success": state["best"], "out": str(out)}


def _start_spread(model, storage: Storage) -> dict:
    """With a learned start: `start_std`, its shared spread (1 where training began), and `start_std_scene`, the
    10th, 50th and 90th percentiles of the spread it now gives the iteration's observations; nothing without."""
    if model.start is None:
        return {}
    with torch.no_grad():
        prefix = cast_prefix(stack_prefixes([d.prefix for d in storage.decisions]), torch.float32)
        spreads = model.start.std_of(model.policy.start_log_spread(prefix))[:, 0]
    return {"start_std": round(float(model.start.std().detach()), 4),
            "start_std_scene": [round(float(q), 4) for q in spreads.quantile(torch.tensor([0.1, 0.5, 0.9]))]}


def _prefixed(prefix: str, summary: dict) -> dict:
    return {f"{prefix}_{key}": summary.get(key) for key in SUMMARY_KEYS}


def _validate(algorithm: Algorithm, out: Path, iteration: int, cfg: RLConfig, env_cfg: EnvConfig, videos: int = 0,
              backend: str = "local") -> dict:
    """Validate the policy the run saves: the weight average when there is one."""
    from chess_sim.eval import EvalError, validate

    began = time.perf_counter()
    eval_cfg = EvalConfig(episodes=cfg.run.val_episodes, seed=cfg.run.val_seed, envs=cfg.run.envs, videos=videos)
    policy = algorithm.model.policy
    try:
        with averaged(policy, algorithm.average):
            summary = validate(policy, out / "val" / f"iter_{iteration:04d}", eval_cfg, env_cfg,
                               f"{out.name} iteration {iteration}", backend)
    except EvalError as error:
        raise RLError(str(error)) from None
    return {**_prefixed("val", summary), "val_success_ci": summary["success_ci"],
            "val_seconds": time.perf_counter() - began}


def _checkpoint(out: Path, name: str, algorithm: Algorithm, generator: torch.Generator, state: dict) -> None:
    policy, average = algorithm.model.policy, algorithm.average
    live = {} if average is None else {"live_policy": average.live_weights(policy)}
    with averaged(policy, average):
        runs.save_checkpoint(out / name, policy, {
            **algorithm.state_dict(), "generator": generator.get_state(), "torch_rng": torch.get_rng_state(),
            **live, **state}, STATE_FILE)


def _restore(directory: Path, algorithm: Algorithm, generator: torch.Generator) -> dict:
    saved = runs.load_state(directory / STATE_FILE)
    try:
        if algorithm.average is not None:
            WeightAverage.copy_into(algorithm.model.policy, saved["live_policy"])
        algorithm.load_state_dict(saved)
        generator.set_state(saved["generator"])
        torch.set_rng_state(saved["torch_rng"])
        return {key: saved[key] for key in ("iteration", "next_index", "best", "elapsed_s")}
    except (KeyError, RuntimeError, ValueError, TypeError) as error:
        raise RLError(f"{directory}/{STATE_FILE} does not fit this run ({first_line(error)})") from None


def _log(out: Path, line: dict, algorithm: Algorithm, scalars=None, verbose: bool = False) -> None:
    jsonl.append(out / "log.jsonl", line)
    if verbose:
        print(json.dumps(line), flush=True)
    if "val_success" in line:  # redrawn at each validation, so a run can be watched
        from chess_sim.report import plots

        if not verbose:
            print(_validation_line(line, algorithm.headline), flush=True)
        runs.redraw(out, plots.rl_figure(jsonl.read(out / "log.jsonl")))
    if scalars is not None:
        for name, value in _flat(line).items():
            scalars.add_scalar(name, value, line["iteration"])
        scalars.flush()


def _validation_line(line: dict, headline: tuple[tuple[str, str], ...] = ()) -> str:
    """One short line per validation for the terminal (the full line is in `log.jsonl`); `headline`: the
    algorithm's (key, format) pairs, shown where the line has them."""
    parts = [f"iteration {line['iteration']}", f"{line['elapsed_s'] / 60:.1f} min",
             f"validation {100 * line['val_success']:.1f}%"]
    if line.get("val_success_ci") is not None:
        parts[-1] += " [{:.0f}, {:.0f}]".format(*(100 * bound for bound in line["val_success_ci"]))
    if line.get("train_success") is not None:
        parts.append(f"training rollouts {100 * line['train_success']:.1f}%")
    if "start_std" in line:
        parts.append(f"start spread {line['start_std']:.3f}")
    parts += [form.format(line[key]) for key, form in headline if key in line]
    return "  ".join(parts)


def _tensorboard(out: Path):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(out / "tensorboard"))


def _flat(line: dict, prefix: str = "") -> dict[str, float]:
    """The numbers of a log line as TensorBoard tags (`rollout_parts/env`, `val_ends/success`, ...)."""
    flat: dict[str, float] = {}
    for key, value in line.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key != "iteration":
            flat[f"{prefix}{key}"] = float(value)
    return flat
