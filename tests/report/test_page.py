"""Run reports: built by a small RL run at each validation, loaded in headless Chromium (figures decode, videos
play, no script errors), evaluation and partial runs, one-line errors; the TensorBoard scalars."""

import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from chess_sim.cli import main
from chess_sim.config import CameraConfig, RLConfig, profile, replace_fields
from chess_sim.report.page import ReportError, build_report
from chess_sim.rl.runner import run

pytestmark = pytest.mark.slow  # an RL run and headless Chromium

ENV = replace(profile("baseline"), episode_seconds=1.5, camera=CameraConfig(64, 64))
CFG = replace_fields(RLConfig(), iterations=2, episodes=2, envs=2, val_episodes=2, val_every=1, minibatch=4, epochs=1,
                     lr=1e-4, critic_warmup=1, torch_threads=1, report_videos=2, tensorboard=True)


@pytest.fixture(scope="module")
def rl_run(tiny_policy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rl") / "run"
    run(tiny_policy_dir, out, CFG, ENV)
    return out


def chromium_check(page):
    """(text of #page-check, stderr) after loading `page` in headless Chromium with media autoplay."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "Chromium is missing: scripts/setup.sh installs Debian's chromium"
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
         "--enable-logging=stderr", "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    match = re.search(r'<p id="page-check">([^<]*)</p>', result.stdout)
    assert match, f"no page check in Chromium's DOM: {result.stderr[-500:]}"
    return match.group(1), result.stderr


def counts(text, what):
    done, total = re.search(rf"{what} (\d+)/(\d+)", text).groups()
    return int(done), int(total)


def test_rl_writes_a_report_that_loads_in_chromium(rl_run):
    page = rl_run / "report.html"
    assert page.is_file()
    text, stderr = chromium_check(page)
    images, videos = counts(text, "images"), counts(text, "videos")
    assert images[1] >= 2 and images[0] == images[1], text  # learning curves and details
    assert videos[1] == CFG.run.report_videos and videos[0] == videos[1], text
    assert "Uncaught" not in stderr
    html = page.read_text()
    for section in ("Learning curves", "Details", "Checkpoints against the start", "Self-check: passed",
                    "Arguments", "McNemar p"):
        assert section in html


def test_a_report_written_elsewhere_still_finds_the_videos(rl_run, tmp_path, capsys):
    page = tmp_path / "pages" / "run.html"
    assert main(["report", str(rl_run), "--out", str(page)]) == 0
    text, _ = chromium_check(page)
    assert counts(text, "videos")[0] == CFG.run.report_videos


def test_an_evaluation_directory_gets_its_own_page(rl_run):
    page = build_report(rl_run / "val" / "iter_0002")
    html = page.read_text()
    assert "Summary" in html and "Success and end reasons" in html and html.count("<video") == CFG.run.report_videos


def test_an_evaluation_that_checked_the_expert_shows_its_solvable_success(rl_run, tmp_path):
    import json

    evaluation = tmp_path / "checked"
    shutil.copytree(rl_run / "val" / "iter_0002", evaluation)
    summary = json.loads((evaluation / "summary.json").read_text())
    summary.update(expert_solvable=2, success_expert_solvable=0.5, success_expert_solvable_ci=[0.1, 0.9])
    (evaluation / "summary.json").write_text(json.dumps(summary))
    assert "success on expert-solvable scenes" in build_report(evaluation).read_text()


def test_a_partial_run_still_gives_a_page_of_what_is_there(rl_run, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    log = (rl_run / "log.jsonl").read_text().splitlines()
    (partial / "log.jsonl").write_text(log[0] + "\n" + log[1][:40])  # one whole line and a torn one
    html = build_report(partial).read_text()
    assert "1 validations" in html and "Needs two validations" in html and "Not run yet" in html
    (partial / "log.jsonl").write_text("")
    assert "no iteration has finished yet" in build_report(partial).read_text()


def test_no_run_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(ReportError, match="holds no chess-sim run"):
        build_report(tmp_path)
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_tensorboard_holds_the_logged_scalars(rl_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(rl_run / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    for tag in ("val_success", "kl", "clipfrac", "explained_variance", "sigma_mean", "rollout_parts/env"):
        assert tag in tags
    assert [event.step for event in events.Scalars("val_success")] == [0, 1, 2]


def test_a_page_that_cannot_be_drawn_never_stops_the_run(tmp_path, monkeypatch, capsys):
    import chess_sim.report.page as report

    def broken(run):
        raise ValueError("no figure today")

    monkeypatch.setattr(report, "build_report", broken)
    report.refresh(tmp_path)
    assert "report: not refreshed (ValueError: no figure today)" in capsys.readouterr().err
