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


def test_rl_details_draw_the_iterations_as_the_rl_loop_logs_them():
    validations = [{"iteration": i, "val_success": 0.5, "val_success_ci": [0.3, 0.7], "val_return": 0.5,
                    "val_ends": {"success": 5, "toppled": 5}, "elapsed_s": 60.0 * i} for i in (0, 5)]
    updates = [{"iteration": i, "kl": 0.01 * i, "clipfrac": 0.1, "explained_variance": 0.2, "sigma_mean": 0.005,
                "start_std": 1.0 - 0.05 * i, "train_return": 0.3, "rollout_s": 30.0, "update_s": 0.4,
                "rollout_parts": {"prep": 0.2, "sample": 12.0, "env": 14.0, "rounds": 150},
                "elapsed_s": 60.0 * i} for i in range(1, 6)]
    ppo = {"rl": {"algorithm": "ppo"}}
    with_updates = plots.rl_detail_figure([validations[0], *updates[:-1], {**updates[-1], **validations[1]}], ppo)
    without = plots.rl_detail_figure(validations, ppo)
    assert _image(with_updates).size == _image(without).size and with_updates != without
    assert plots.rl_detail_figure(updates) == plots.rl_detail_figure(updates, ppo)  # no arguments: the seed's ppo


def test_rl_details_take_the_algorithm_from_the_run_arguments_not_from_the_log_keys():
    # one log with both algorithms' keys: the panel draws those of the algorithm args.json names
    updates = [{"iteration": i, "kl": 0.01 * i, "clipfrac": 0.1, "fit_loss_first_epoch": 1.0 / i,
                "fit_loss_last_epoch": 0.5 / i, "fitted": 10, "fit_steps": 4, "train_return": 0.3, "rollout_s": 30.0,
                "update_s": 0.4, "elapsed_s": 60.0 * i} for i in range(1, 6)]
    ppo, filtered = (plots.rl_detail_figure(updates, {"rl": {"algorithm": name}}) for name in ("ppo", "filtered"))
    assert _image(ppo).size == _image(filtered).size and ppo != filtered
    without_fit = [{key: value for key, value in line.items() if not key.startswith("fit_")} for line in updates]
    without_ppo = [{key: value for key, value in line.items() if key not in ("kl", "clipfrac")} for line in updates]
    assert plots.rl_detail_figure(without_fit, {"rl": {"algorithm": "ppo"}}) == ppo  # fit keys are not drawn
    assert plots.rl_detail_figure(without_ppo, {"rl": {"algorithm": "filtered"}}) == filtered  # nor PPO's
