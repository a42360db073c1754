"""Learning-curve figures decode as PNG images of the expected size, with or without logged intervals."""

import io

import numpy as np
from PIL import Image

from chess_sim.report import plots
from chess_sim.report.summary import wilson


def _image(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def test_train_figure_from_a_training_log():
    lines = [{"step": 50 * i, "loss": 2.0 / i, "lr": 1e-4} for i in range(1, 20)]
    lines += [{"step": 500, "val_success": 0.2, "val_success_ci": [0.05, 0.5]}, {"step": 950, "val_success": 0.6,
                                                                                 "val_success_ci": [0.3, 0.85]}]
    image = _image(plots.train_figure(lines))
    assert image.format == "PNG" and image.size == (1100, 396)
    assert len(np.unique(np.asarray(image.convert("L")))) > 10  # lines and text, not a blank canvas


def test_rl_figure_draws_intervals_from_episode_counts_when_absent(tmp_path):
    lines = [{"iteration": 0, "val_success": 0.5, "val_success_ci": [0.3, 0.7], "elapsed_s": 30.0}]
    lines += [{"iteration": i, "train_success": 0.4 + 0.02 * i, "train_episodes": 16, "elapsed_s": 30.0 + 60 * i}
              for i in range(1, 6)]
    lines[-1].update(val_success=0.65, val_success_ci=[0.45, 0.8])
    path = tmp_path / "curves.png"
    plots.write_png(path, plots.rl_figure(lines))
    assert _image(path.read_bytes()).size == (1100, 396)
    assert plots._interval(lines[1], "train") == wilson(round(0.42 * 16), 16)
    assert plots._interval(lines[0], "val") == (0.3, 0.7)
