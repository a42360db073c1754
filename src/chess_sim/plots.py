"""Learning-curve figures (PNG) drawn from the JSON-lines logs that training and RL write.

`train_figure(lines)`: imitation training (`train_log.jsonl`): loss vs step, validation success vs step.
`rl_figure(lines)`: RL fine-tuning (`log.jsonl`): validation and training-rollout success vs iteration and
validation success vs wall time. Success is drawn with its Wilson 95% interval wherever the log has one.
Both return the PNG bytes; `write_png` stores them atomically.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a training machine
import matplotlib.pyplot as plt  # noqa: E402

from chess_sim import atomic  # noqa: E402
from chess_sim.summary import wilson  # noqa: E402


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


def _success(axes, x: list[float], lines: list[dict], prefix: str, colour: str, label: str) -> None:
    """Success rates with their Wilson 95% band (from the logged interval, or from the episode count)."""
    rates = [line[f"{prefix}_success"] for line in lines]
    intervals = [_interval(line, prefix) for line in lines]
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
