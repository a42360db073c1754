"""Imitation training of a flow policy on LeRobot datasets (flow matching, AdamW, warm-up + cosine).

Datasets are read with LeRobot's own loader; each sample is a decision: the observation at frame t and the
action chunk t .. t+49 (`action_is_pad` marks steps past the episode's end, left out of the loss). Several
datasets (demonstrations and DAgger rounds) train as one: their samples are pooled and a new policy normalises
with their statistics aggregated by LeRobot's `aggregate_stats`.
Checkpoints: `<out>/last` every `save_every` steps and at the end (policy files + `trainer.pt` with the
optimizer, scheduler and step; each step's batch and noise are functions of the seed and the step, see
`batch_order` and `step_generator`), so `resume` continues without losing or repeating a step and trains exactly
as an uninterrupted run would, and
`<out>/best` (highest validation success; a later one wins ties). With a weight average (`TrainConfig.ema`) both hold
the average, which is also what validates, and `trainer.pt` keeps the live weights the steps move. `<out>/train_log.jsonl`: one line per log
interval and per validation. Validations are evaluations (`chess_sim.eval`) of the noise-free policy on the
validation scenes, each kept in `<out>/val/step_XXXXXX`; `<out>/curves.png` (loss and validation success) and
`<out>/report.html` are redrawn at each validation. Every file is written atomically.

Policies: `compact` (new, or from `init`), or `smolvla` from `init`, a LeRobot SmolVLA checkpoint directory
(ours, or e.g. a downloaded `lerobot/smolvla_base`; without our normaliser file the dataset's statistics
normalise). Only parameters with `requires_grad` train (SmolVLA: the action expert and `state_proj`; the
prefix is recomputed with gradients every step, so `state_proj` learns too).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from chess_sim import jsonl, runs
from chess_sim.config import (CHUNK, POLICY_KINDS, VALIDATION_SEED, CompactConfig, EnvConfig, EvalConfig, SceneConfig,
                              TrainConfig, profile)
from chess_sim.data.integrity import DatasetFilesError, checked_metadata, repo_id
from chess_sim.errors import first_line
from chess_sim.policy.base import FlowPolicy, Normalizer, flow_matching_loss, flow_times
from chess_sim.policy.compact import CompactPolicy
from chess_sim.policy.average import WeightAverage, averaged

STATE_FILE = "trainer.pt"
ARGS_FILE = "train_args.json"


class TrainError(runs.RunError):
    """Bad input for training (one-line message for the CLI)."""


def open_dataset(root: Path, chunk: int, recovery: bool = True):
    """LeRobot dataset whose samples carry the next `chunk` actions; without `recovery`, only the episodes
    that `meta/chess_sim.json` lists as clean expert demonstrations."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = Path(root)
    try:
        meta = checked_metadata(root)
    except DatasetFilesError as error:
        raise TrainError(str(error)) from None
    needed = {"observation.images.front", "observation.images.wrist", "observation.state", "action"}
    missing = needed - set(meta.features)
    if missing:
        raise TrainError(f"{root} lacks the features {sorted(missing)} a chess-sim policy needs")
    clean = _clean_episodes(root, meta.total_episodes)
    if not recovery and clean is None:
        raise TrainError(f"{root} has no meta/chess_sim.json: only a chess-sim recording says which episodes are "
                         f"recovery demonstrations")
    if not recovery and not clean:
        raise TrainError(f"{root} holds no clean (non-recovery) episodes")
    episodes = None if recovery else clean
    return LeRobotDataset(repo_id(root), root=root, episodes=episodes,
                          delta_timestamps={"action": [i / meta.fps for i in range(chunk)]})


def open_datasets(roots: list[Path], chunk: int, recovery: bool = True):
    """(one torch dataset of every sample of `roots`, their LeRobot statistics aggregated); see `open_dataset`."""
    from lerobot.datasets.compute_stats import aggregate_stats

    datasets = [open_dataset(root, chunk, recovery) for root in roots]
    if len(datasets) == 1:
        return datasets[0], datasets[0].meta.stats
    first = datasets[0].meta
    for root, dataset in zip(roots[1:], datasets[1:]):
        if dataset.meta.fps != first.fps or dataset.meta.shapes != first.shapes:
            raise TrainError(f"{root} does not match {roots[0]} (fps or feature shapes differ)")
    return torch.utils.data.ConcatDataset(datasets), aggregate_stats([dataset.meta.stats for dataset in datasets])


def _clean_episodes(root: Path, total: int) -> list[int] | None:
    """The episodes `meta/chess_sim.json` lists as clean expert demonstrations (None without the file: a dataset
    recorded elsewhere); TrainError when the file is there but damaged, so a damaged recording is never trained on
    without a word."""
    facts = root / "meta" / "chess_sim.json"
    if not facts.is_file():
        return None
    try:
        saved = json.loads(facts.read_text())["saved"]
        clean = [entry["episode_index"] for entry in saved if not entry["recovery"]]
        fits = isinstance(saved, list) and all(isinstance(entry["episode_index"], int) and isinstance(
            entry["recovery"], bool) and 0 <= entry["episode_index"] < total for entry in saved)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise TrainError(f"{facts} is damaged ({type(error).__name__}: {first_line(error)})") from None
    if not fits:
        raise TrainError(f"{facts} is damaged: its saved episodes do not fit the dataset's {total} episodes")
    return clean


def _schedule(cfg: TrainConfig):
    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return factor


def train(dataset_dirs: Path | list[Path], out: Path, cfg: TrainConfig, policy_config: CompactConfig | None = None,
          init: Path | None = None, resume: bool = False, env_cfg: EnvConfig | None = None,
          policy_kind: str = "compact") -> dict:
    """Train a `policy_kind` policy on one or more datasets (see the module docstring); returns a summary (final
    loss, steps/s, best validation success)."""
    from chess_sim.progress import Progress

    if policy_kind not in POLICY_KINDS:
        raise TrainError(f"unknown policy kind {policy_kind!r}; choose one of {', '.join(POLICY_KINDS)}")
    if policy_kind == "smolvla" and init is None and not resume:
        raise TrainError("--policy smolvla needs --init DIR, a LeRobot SmolVLA checkpoint (e.g. lerobot/smolvla_base)")
    policy_class = _policy_class(policy_kind)
    torch.set_num_threads(cfg.torch_threads)
    out = Path(out)
    policy = None
    roots = [Path(root) for root in (dataset_dirs if isinstance(dataset_dirs, (list, tuple)) else [dataset_dirs])]
    # one dataset keeps the form runs made before several could be given, so they still resume
    args = {"train": asdict(cfg), "dataset": str(roots[0]) if len(roots) == 1 else [str(root) for root in roots],
            "policy": policy_kind,
            "init": None if init is None else str(init)}
    tasks = None if env_cfg is None else env_cfg.scene.tasks
    if tasks not in (None, SceneConfig.tasks):  # the default leaves out the key, so runs from before still resume
        args["tasks"] = tasks
    continuing = runs.open_run(out, resume, STATE_FILE, ARGS_FILE)
    if resume:
        runs.check_same_args(out / ARGS_FILE, args, _run_defining, "only --steps and the process settings")
    if continuing:
        policy = policy_class.load(out / "last")
    elif init is not None and policy_kind == "compact":
        policy = CompactPolicy.load(init)
    chunk = policy.chunk if policy else CHUNK if policy_kind == "smolvla" else (policy_config or CompactConfig()).chunk
    dataset, stats = open_datasets(roots, chunk, cfg.recovery)
    if policy is None and policy_kind == "smolvla":
        policy = policy_class.load(init, stats=stats)
    elif policy is None:
        torch.manual_seed(cfg.seed)
        if env_cfg is not None and env_cfg.scene.tasks == "captures":  # a policy for captures reads the victim
            policy_config = replace(policy_config or CompactConfig(), captures=1)
        policy = CompactPolicy(policy_config, Normalizer.from_stats(stats))
    policy.train()
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=cfg.lr,
                                  weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(cfg))
    # a resumed run's `last` holds the average: it starts there, and the live weights come from the state
    average = WeightAverage(policy, cfg.ema) if cfg.ema else None
    step, best, losses = 0, -1.0, []
    if continuing:
        state = runs.load_state(out / "last" / STATE_FILE)
        try:
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            step, best = state["step"], state["best"]
            losses = list(state.get("unlogged_losses", []))
            if average is not None:
                WeightAverage.copy_into(policy, state["live_policy"])
        except (KeyError, RuntimeError, ValueError, TypeError) as error:
            raise TrainError(f"{out}/last/{STATE_FILE} does not fit this run ({first_line(error)})") from None
        runs.trim_log(out / "train_log.jsonl", "step", step)
    else:
        out.mkdir(parents=True, exist_ok=True)
        runs.write_args(out / ARGS_FILE, args)
        _checkpoint(policy, out, optimizer, scheduler, step, best, [], average)  # resumable from the first second

    # a finished run resumed (a loop re-running every step) decodes no frames it will not train on
    batches = _batches(dataset, policy, cfg, step) if step < cfg.steps else iter(())
    bar = Progress(cfg.steps - step, "train", unit="steps")
    steps_at_start = step
    progress = _Progress(step, best)
    try:
        if continuing and _missing_validation(out, step, cfg):
            progress.best = _validation(policy, cfg, env_cfg, out, step, best, bar, average)
        _loop(policy, batches, optimizer, scheduler, cfg, env_cfg, out, progress, losses, bar, average)
    except KeyboardInterrupt:  # keep every finished step: --resume continues from here
        step = progress.step
        _checkpoint(policy, out, optimizer, scheduler, step, progress.best, unlogged(losses, step, cfg), average)
        raise
    seconds = bar.close()
    trained = progress.step > steps_at_start
    return {"steps": progress.step, "final_loss": losses[-1] if trained else None,
            "best_val_success": progress.best if progress.best >= 0 else None,
            "steps_per_s": (progress.step - steps_at_start) / seconds if seconds else None, "out": str(out)}


PROCESS_SETTINGS = ("steps", "loader_workers", "cache_workers", "torch_threads")
"""Training settings a resume may change: the step budget, and how the work is spread over processes and threads."""


def _run_defining(args: dict) -> dict:
    """What a resume must keep: the dataset, the policy kind, the task profile and the training settings but
    `PROCESS_SETTINGS` (the policy itself comes from `last/`, so `init` need not be given again). Runs written
    before the weight average existed trained without one."""
    settings = {"ema": TrainConfig.ema, **args["train"]}
    return {"dataset": args["dataset"], "policy": args["policy"], "tasks": args.get("tasks", SceneConfig.tasks),
            "train": {key: value for key, value in settings.items() if key not in PROCESS_SETTINGS}}


def _batches(dataset, policy, cfg: TrainConfig, start_step: int):
    """Endless training batches from `start_step` on, in `batch_order`: from an in-memory `FrameCache` (compact
    policy, `cache_frames`; built here, before the first step), or streamed from the videos by LeRobot's loader in
    spawned, persistent processes (forking a process that already runs torch threads can deadlock)."""
    order = batch_order(len(dataset), cfg.batch_size, cfg.seed, start_step)
    if cfg.cache_frames and isinstance(policy, CompactPolicy):
        from chess_sim.imitation.frame_cache import FrameCache
        from chess_sim.progress import Progress

        bar = Progress(len(dataset), "decode frames", unit="samples")
        cache = FrameCache(dataset, policy.config.image_size, cfg.cache_workers, bar=bar)
        bar.close()
        return (cache.batch(torch.as_tensor(indices)) for indices in order)
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=order, num_workers=cfg.loader_workers, persistent_workers=cfg.loader_workers > 0,
        multiprocessing_context="spawn" if cfg.loader_workers > 0 else None)
    return iter(loader)


def batch_order(samples: int, batch_size: int, seed: int, start_step: int):
    """The sample indices of every step's batch from `start_step` on, endlessly: epoch e is a permutation drawn
    from (seed, e) alone, cut into batches (the last one shorter). A pure function of the step, so a resumed run
    takes the very batches an uninterrupted one would, even from the middle of an epoch."""
    per_epoch = -(-samples // batch_size)
    epoch, start = divmod(start_step, per_epoch)
    while True:
        permutation = np.random.default_rng([seed, epoch]).permutation(samples)
        for first in range(start * batch_size, samples, batch_size):
            yield permutation[first:first + batch_size].tolist()
        epoch, start = epoch + 1, 0


def step_generator(seed: int, step: int) -> torch.Generator:
    """The generator of the flow-matching noise and times of step `step` (counted from 0): drawn from (seed, step)
    alone, so a run interrupted anywhere in a step draws the same on resume."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence([seed, step]).generate_state(1)[0]))


def _policy_class(kind: str):
    if kind == "smolvla":  # imported only when asked for: it keeps the hub offline for the whole process
        from chess_sim.policy.smolvla import SmolVLAFlowPolicy

        return SmolVLAFlowPolicy
    return CompactPolicy


@dataclass
class _Progress:
    step: int
    """Optimizer steps finished."""
    best: float
    """Best validation success so far (-1 before any validation)."""


def _loop(policy, batches, optimizer, scheduler, cfg: TrainConfig, env_cfg, out: Path,
          progress: _Progress, losses: list, bar, average: WeightAverage | None) -> None:
    """The optimisation loop from `progress.step` to `cfg.steps`, updating `progress` (and `average`) as it goes."""
    step = progress.step
    while step < cfg.steps:
        loss = imitation_loss(policy, next(batches), step_generator(cfg.seed, step), cfg.time_beta)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        if average is not None:
            average.update(policy)
        step += 1
        losses.append(loss.item())
        if step % cfg.log_every == 0 or step == cfg.steps:
            recent = losses[-(step % cfg.log_every or cfg.log_every):]
            jsonl.append(out / "train_log.jsonl",
                         {"step": step, "loss": sum(recent) / len(recent), "lr": scheduler.get_last_lr()[0]})
        progress.step = step  # from here on, a Ctrl-C checkpoints this step as finished
        bar.advance(note=f"loss {losses[-1]:.4f}")
        if _validation_due(step, cfg):
            progress.best = _validation(policy, cfg, env_cfg, out, step, progress.best, bar, average)
        if step % cfg.save_every == 0 or step == cfg.steps:
            _checkpoint(policy, out, optimizer, scheduler, step, progress.best, unlogged(losses, step, cfg), average)


def imitation_loss(policy: FlowPolicy, batch: dict, generator: torch.Generator, time_beta: float) -> torch.Tensor:
    """The flow-matching loss of a batch of demonstration samples (LeRobot keys, action chunks (B, T, A) in joint
    units), through the encoders: the noise (B, T, C), then the times (B,) ~ Beta(time_beta, 1), drawn on the CPU
    from `generator`; computed on the policy's device."""
    device = next(policy.parameters()).device
    actions = policy.normalizer.normalize_action(batch["action"])
    noise = torch.randn(*actions.shape[:2], policy.chain_dim, generator=generator)
    t = flow_times(actions.shape[0], time_beta, generator)
    return flow_matching_loss(policy, policy.encode(batch), actions.to(device), noise.to(device), t.to(device),
                              pad=batch["action_is_pad"].to(device))


def _validation_due(step: int, cfg: TrainConfig) -> bool:
    return cfg.val_episodes > 0 and (step == cfg.steps or bool(cfg.val_every and step % cfg.val_every == 0))


def _missing_validation(out: Path, step: int, cfg: TrainConfig) -> bool:
    """A validation due at `step` that the log lacks: a run stopped during it, after the step was checkpointed."""
    return _validation_due(step, cfg) and not any(
        line.get("step") == step and "val_success" in line for line in jsonl.read(out / "train_log.jsonl"))


def _validation(policy: FlowPolicy, cfg: TrainConfig, env_cfg: EnvConfig | None, out: Path, step: int, best: float,
                bar, average: WeightAverage | None = None) -> float:
    """Validate at `step` the policy the run saves (the average when there is one): log it, redraw the curves,
    keep `best`; returns the best validation success so far."""
    from chess_sim.report import plots

    with averaged(policy, average):
        line = _validate(policy, cfg, env_cfg, out, step)
    jsonl.append(out / "train_log.jsonl", line)
    bar.line(f"step {step}: validation success {100 * line['val_success']:.1f}% "
             f"[{100 * line['val_success_ci'][0]:.0f}, {100 * line['val_success_ci'][1]:.0f}]")
    runs.redraw(out, plots.train_figure(jsonl.read(out / "train_log.jsonl")))
    if line["val_success"] < best:
        return best
    with averaged(policy, average):
        runs.save_checkpoint(out / "best", policy)
    return line["val_success"]


def _validate(policy: FlowPolicy, cfg: TrainConfig, env_cfg: EnvConfig | None, out: Path, step: int) -> dict:
    """Evaluate on the validation scenes into `<out>/val/step_XXXXXX`; returns the log line."""
    from chess_sim.eval import validate

    policy.eval()
    try:
        summary = validate(policy, out / "val" / f"step_{step:06d}",
                           EvalConfig(episodes=cfg.val_episodes, seed=VALIDATION_SEED),
                           env_cfg or profile("baseline"), f"{out.name} step {step}")
    finally:
        policy.train()
    return {"step": step, "val_success": summary["success"], "val_success_ci": summary["success_ci"]}


def unlogged(losses: list[float], step: int, cfg: TrainConfig) -> list[float]:
    """The losses of the steps after the last log line, which the next line averages with those still to come."""
    return losses[max(0, len(losses) - step % cfg.log_every):] if step % cfg.log_every else []


def _checkpoint(policy, out: Path, optimizer, scheduler, step: int, best: float, unlogged_losses: list[float],
                average: WeightAverage | None = None) -> None:
    live = {} if average is None else {"live_policy": average.live_weights(policy)}
    with averaged(policy, average):
        runs.save_checkpoint(out / "last", policy, {"optimizer": optimizer.state_dict(),
                                                    "scheduler": scheduler.state_dict(), "step": step, "best": best,
                                                    "unlogged_losses": unlogged_losses, **live}, STATE_FILE)
