"""Learning-curve figures (PNG) drawn from the JSON-lines logs that training and RL write.

`train_figure(lines)`: imitation training (`train_log.jsonl`): loss vs step, validation success vs step.
`rl_figure(lines)`: RL fine-tuning (`log.jsonl`): validation and training-rollout success vs iteration and
validation success vs wall time. `rl_detail_figure(lines, arguments)`: return, per-piece success, end reasons, the
update's statistics (of the algorithm `args.json` names), noise size and the time split of each iteration. `eval_figure(summary)`: one evaluation's success
per piece and its end reasons. Success is drawn with its Wilson 95% interval wherever the log has one.
All return the PNG bytes; `write_png` stores them atomically.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a training machine
import matplotlib.pyplot as plt  # noqa: E402

from chess_sim import atomic  # noqa: E402
from chess_sim.report.summary import wilson  # noqa: E402


def train_figure(lines: list[dict]) -> bytes:
    losses = [line for line in lines if "loss" in line]
    validations = [line for line in lines if "val_success" in line]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.plot([line["step"] for line in losses], [line["loss"] for line in losses], color="tab:blue")
    left.set(xlabel="optimizer step", ylabel="flow-matching loss", yscale="log", title="Training loss")
    _success(right, [line["step"] for line in validations], validations, "val", "tab:green", "validation")
    right.set(xlabel="optimizer step", title="Validation success (noise-free policy)")
    return _png(figure)


def rl_figure(lines: list[dict]) -> bytes:
    validations = [line for line in lines if "val_success" in line]
    rollouts = [line for line in lines if line.get("train_success") is not None]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    _success(left, [line["iteration"] for line in validations], validations, "val", "tab:green", "validation")
    _success(left, [line["iteration"] for line in rollouts], rollouts, "train", "tab:orange", "training rollouts")
    left.set(xlabel="iteration", title="Success vs iteration")
    _success(right, [line["elapsed_s"] / 60 for line in validations], validations, "val", "tab:green",
             "validation")
    right.set(xlabel="wall time (minutes)", title="Validation success vs wall time")
    return _png(figure)


UPDATE_SERIES = {
    "ppo": ("PPO statistics", (("kl", "tab:purple", "approx KL"), ("clipfrac", "tab:brown", "clip fraction"))),
    "filtered": ("Flow-matching loss of the fitted chunks", (("fit_loss_first_epoch", "tab:purple", "first epoch"),
                                                             ("fit_loss_last_epoch", "tab:brown", "last epoch"))),
}
"""The update panel of each RL algorithm: its title and (log key, colour, label) series."""


def rl_detail_figure(lines: list[dict], arguments: dict | None = None) -> bytes:
    """`arguments`: the run's `args.json`, which names its algorithm (the seed's `ppo` when absent)."""
    validations = [line for line in lines if "val_success" in line]
    updates = [line for line in lines if line["iteration"] > 0 and "update_s" in line]
    figure, axes = plt.subplots(2, 3, figsize=(14, 7))
    returns, pieces, ends, ppo, noise, split = axes.flatten()
    for prefix, rows, colour in (("val", validations, "tab:green"), ("train", updates, "tab:orange")):
        rows = [line for line in rows if line.get(f"{prefix}_return") is not None]
        returns.plot([line["iteration"] for line in rows], [line[f"{prefix}_return"] for line in rows],
                     marker="o", color=colour, label="validation" if prefix == "val" else "training rollouts")
    returns.set(xlabel="iteration", ylabel="mean episode return", title="Return")
    returns.legend(loc="best")
    for piece, colour in (("pawn", "tab:blue"), ("knight", "tab:red")):
        rows = [line for line in validations if line.get(f"val_success_{piece}") is not None]
        _band(pieces, [line["iteration"] for line in rows], [line[f"val_success_{piece}"] for line in rows],
              [line.get(f"val_success_{piece}_ci") for line in rows], colour, piece)
    pieces.set(xlabel="iteration", title="Validation success per piece")
    _stacked_ends(ends, [line["iteration"] for line in validations], [line.get("val_ends") or {} for line in validations])
    title, series = UPDATE_SERIES.get(((arguments or {}).get("rl") or {}).get("algorithm", "ppo"), ("Update", ()))
    for key, colour, label in series:
        rows = [line for line in updates if line.get(key) is not None]
        ppo.plot([line["iteration"] for line in rows], [line[key] for line in rows], marker=".", color=colour,
                 label=label)
    ppo.set(xlabel="iteration", title=title)
    if series:
        ppo.legend(loc="best")
    iterations = [line["iteration"] for line in updates]
    critic_rows = [line for line in updates if line.get("explained_variance") is not None]  # PPO's critic only
    noise.plot([line["iteration"] for line in critic_rows],
               [max(-1.0, line["explained_variance"]) for line in critic_rows], marker=".", color="tab:cyan")
    noise.set(xlabel="iteration", ylabel="explained variance (floored at -1)", ylim=(-1.05, 1.05),
              title="Critic fit and noise size")
    sizes = noise.twinx()
    sizes.plot(iterations, [line.get("sigma_mean") for line in updates], marker=".", color="tab:gray")
    steered = [line for line in updates if line.get("start_std") is not None]
    if steered:  # a learned start's shared spread (`rl --steer`)
        sizes.plot([line["iteration"] for line in steered], [line["start_std"] for line in steered], linestyle="--",
                   color="black")
    sizes.set(ylabel="mean noise size (grey), start spread (dashed)")
    _time_split(split, updates)
    return _png(figure)


def eval_figure(summary: dict) -> bytes:
    figure, (pieces, ends) = plt.subplots(1, 2, figsize=(10, 3.6))
    names = ["all", "pawn", "knight"]
    keys = ["success", "success_pawn", "success_knight"]
    rates = [summary.get(key) or 0.0 for key in keys]
    intervals = [summary.get(f"{key}_ci") or (0.0, 0.0) for key in keys]
    errors = [[rate - low for rate, (low, _) in zip(rates, intervals)],
              [high - rate for rate, (_, high) in zip(rates, intervals)]]
    pieces.bar(names, rates, yerr=errors, capsize=6, color=["tab:green", "tab:blue", "tab:red"])
    pieces.set(ylabel="success", ylim=(0, 1.02), title="Success with Wilson 95% intervals")
    counts = summary.get("ends") or {}
    ends.bar(list(counts), list(counts.values()), color=[END_COLOURS.get(end, "tab:gray") for end in counts])
    ends.set(ylabel="episodes", title=f"End reasons ({summary.get('episodes')} episodes)")
    ends.tick_params(axis="x", rotation=30)
    return _png(figure)


END_COLOURS = {"success": "tab:green", "timeout": "tab:gray", "toppled": "tab:orange", "disturbed": "tab:red",
               "dropped": "tab:purple", "unstable": "tab:brown"}


def _stacked_ends(axes, x: list, counts: list[dict]) -> None:
    bottom = [0.0] * len(x)
    for end in END_COLOURS:
        shares = [row.get(end, 0) / max(1, sum(row.values())) for row in counts]
        if any(shares):
            axes.bar(x, shares, bottom=bottom, color=END_COLOURS[end], label=end, width=0.8)
            bottom = [b + share for b, share in zip(bottom, shares)]
    axes.set(xlabel="iteration", ylabel="share of episodes", ylim=(0, 1.02), title="Validation end reasons")
    if any(bottom):
        axes.legend(loc="upper left", fontsize=7)


def _time_split(axes, updates: list[dict]) -> None:
    """Stacked seconds per iteration: the rollout's wall time (policy input, sampling, waiting for the simulators,
    which work while the policy decides for the other group) and the update (PPO's or the filtered fit)."""
    x = [line["iteration"] for line in updates]
    bottom = [0.0] * len(x)
    parts = [("prep", "observation batching"), ("sample", "policy sampling"), ("env", "waiting for simulators")]
    for (key, label), colour in zip(parts, ("tab:olive", "tab:blue", "tab:orange")):
        seconds = [(line.get("rollout_parts") or {}).get(key, 0.0) for line in updates]
        axes.bar(x, seconds, bottom=bottom, color=colour, label=label)
        bottom = [b + value for b, value in zip(bottom, seconds)]
    axes.bar(x, [line.get("update_s", 0.0) for line in updates], bottom=bottom, color="tab:purple",
             label="update")
    axes.set(xlabel="iteration", ylabel="seconds", title="Time per iteration")
    if x:
        axes.legend(loc="upper left", fontsize=7)


def _success(axes, x: list[float], lines: list[dict], prefix: str, colour: str, label: str) -> None:
    """Success rates with their Wilson 95% band (from the logged interval, or from the episode count)."""
    _band(axes, x, [line[f"{prefix}_success"] for line in lines], [_interval(line, prefix) for line in lines],
          colour, label)


def _band(axes, x: list, rates: list, intervals: list, colour: str, label: str) -> None:
    axes.plot(x, rates, marker="o", color=colour, label=label)
    if intervals and all(interval is not None for interval in intervals):
        axes.fill_between(x, [low for low, _ in intervals], [high for _, high in intervals], color=colour, alpha=0.2)
    axes.set(ylabel="success", ylim=(-0.02, 1.02))
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left")


def _interval(line: dict, prefix: str):
    if line.get(f"{prefix}_success_ci") is not None:
        return tuple(line[f"{prefix}_success_ci"])
    episodes = line.get(f"{prefix}_episodes")
    return wilson(round(line[f"{prefix}_success"] * episodes), episodes) if episodes else None


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def write_png(path: Path, data: bytes) -> None:
    atomic.write_file(Path(path), lambda tmp: Path(tmp).write_bytes(data))
