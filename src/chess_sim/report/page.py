"""One HTML page per run (`chess-sim report RUN_DIR`): learning curves, comparisons, episode videos, arguments.

A run directory is one of:
- an RL run (`log.jsonl`, `args.json`, `val/iter_XXXX/` evaluations, `check.json`),
- an imitation-training run (`train_log.jsonl`, `train_args.json`, `val/step_XXXXXX/`),
- an evaluation (`summary.json`, `episodes.csv`, `videos/`, `eval_args.json`).
The page needs no network: figures are embedded as PNG data, videos are linked by relative path (they stay
beside the run). A partial run (a log cut short, no validation yet) gives a page of what is there. The page
carries a small script that, once loaded, writes whether every figure decoded and every video played into
`#page-check` (read by the tests in headless Chromium, and visible to a reader).
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

from chess_sim import atomic, jsonl
from chess_sim.report import plots
from chess_sim.report.compare import CompareError, compare, read_episodes

GALLERY_PER_END = 2
"""Videos shown per end reason (success and each kind of failure)."""


class ReportError(Exception):
    """A directory that holds no run (one-line message for the CLI)."""


def build_report(run: Path, out: Path | None = None) -> Path:
    """Write the page for `run` to `out` (default `RUN/report.html`); returns its path."""
    run = Path(run)
    if not run.is_dir():
        raise ReportError(f"{run} is not a directory")
    out = Path(out) if out is not None else run / "report.html"
    kind = next((kind for kind in RUN_KINDS if (run / kind.log).is_file()), None)
    if kind is not None:
        title, body = f"{kind.name} {run.name}", _run_sections(run, out.parent, kind)
    elif (run / "summary.json").is_file():
        title, body = f"Evaluation {run.name}", _eval_sections(run, out.parent)
    else:
        raise ReportError(f"{run} holds no chess-sim run (no log.jsonl, train_log.jsonl or summary.json)")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out, _page(title, body))
    return out


def refresh(run: Path) -> None:
    """Rewrite `RUN/report.html` during a run; a page that cannot be drawn is reported on stderr and never
    stops the run (the page is derived from files the run keeps anyway)."""
    import sys

    try:
        build_report(run)
    except Exception as error:  # noqa: BLE001 - a figure must not cost hours of training
        print(f"report: not refreshed ({type(error).__name__}: {error})", file=sys.stderr)


@dataclass(frozen=True)
class RunKind:
    name: str
    log: str
    """The run's JSON-lines log."""
    unit: str
    """What a log line counts (its key)."""
    validation: str
    """Folder of the validation at a given count, under `val/`."""
    figures: tuple
    """(title, figure function of the log lines and the run's arguments, the parsed `arguments` file or {})."""
    arguments: str


RUN_KINDS = (
    RunKind("RL run", "log.jsonl", "iteration", "iter_{:04d}",
            (("Learning curves", lambda lines, _: plots.rl_figure(lines)), ("Details", plots.rl_detail_figure)),
            "args.json"),
    RunKind("Imitation training", "train_log.jsonl", "step", "step_{:06d}",
            (("Learning curves", lambda lines, _: plots.train_figure(lines)),), "train_args.json"),
)


def _run_sections(run: Path, base: Path, kind: RunKind) -> list[str]:
    lines = jsonl.read(run / kind.log)
    validations = [line for line in lines if "val_success" in line]
    sections = [_heading(run, lines, kind.unit)]
    if lines:
        arguments = _json(run / kind.arguments) or {}
        sections += [_figure(title, figure(lines, arguments)) for title, figure in kind.figures]
    else:
        sections.append(f"<p>The log is empty: no {kind.unit} has finished yet.</p>")
    sections.append(_comparisons(run / "val", validations, kind.validation, kind.unit))
    sections.append(_gallery(_latest_with_videos(run / "val"), base))
    if kind.log == "log.jsonl":
        sections.append(_check(run))
    sections.append(_arguments(run / kind.arguments))
    return sections


def _eval_sections(run: Path, base: Path) -> list[str]:
    summary = _json(run / "summary.json")
    if summary is None:
        raise ReportError(f"{run}/summary.json cannot be read")
    rows = [("episodes", str(summary.get("episodes")))]
    for key in ("success", "success_pawn", "success_knight", "clean_lift", "disturbed", "toppled"):
        if summary.get(key) is not None:
            rows.append((key.replace("_", " "), _rate(summary[key], summary.get(f"{key}_ci"))))
    if "success_expert_solvable" in summary:
        rows.append(("success on expert-solvable scenes",
                     _rate(summary["success_expert_solvable"], summary.get("success_expert_solvable_ci"))))
    for key in ("return", "close_mm_median", "place_error_mm_median"):
        if summary.get(key) is not None:
            rows.append((key.replace("_", " "), f"{summary[key]:.3g}"))
    return [_table("Summary", ("measure", "value"), rows),
            _figure("Success and end reasons", plots.eval_figure(summary)),
            _gallery(run, base), _arguments(run / "eval_args.json")]


# ---------------------------------------------------------------------------------------------- sections
def _heading(run: Path, lines: list[dict], unit: str) -> str:
    done = max((line.get(unit, 0) for line in lines), default=0)
    validations = [line for line in lines if "val_success" in line]
    text = f"{done} {unit}s logged; {len(validations)} validations"
    if validations:
        best = best_validation(validations, unit)
        text += (f"; best validation success {_rate(best['val_success'], best.get('val_success_ci'))} at {unit} "
                 f"{best[unit]}, latest {_rate(validations[-1]['val_success'], validations[-1].get('val_success_ci'))}")
    return f"<p>{html.escape(str(run))}: {html.escape(text)}.</p>"


def best_validation(validations: list[dict], unit: str) -> dict:
    """The validation `best/` holds: highest success, the later one on ties (as training and RL choose)."""
    return max(validations, key=lambda line: (line["val_success"], line[unit]))


def _comparisons(val_dir: Path, validations: list[dict], pattern: str, unit: str) -> str:
    """Paired comparisons (same validation scenes and x_0 draws) of the first validation, which is the starting
    policy, against the best and the last."""
    if len(validations) < 2:
        return "<h2>Checkpoints against the start</h2><p>Needs two validations; this run has fewer.</p>"
    first, last = validations[0], validations[-1]
    best = best_validation(validations, unit)
    rows = []
    for name, line in (("best", best), ("last", last)):
        try:
            result = compare(val_dir / pattern.format(first[unit]), val_dir / pattern.format(line[unit]))
        except CompareError as error:
            rows.append((name, f"{unit} {line[unit]}", "-", "-", "-", html.escape(str(error))))
            continue
        rows.append((name, f"{unit} {line[unit]}", _rate(result["success_a"], result["success_a_ci"]),
                     _rate(result["success_b"], result["success_b_ci"]), f"{100 * result['difference']:+.1f} points",
                     f"{result['only_a']} / {result['only_b']}; McNemar p = {result['mcnemar_p']:.3g}"))
    return _table(f"Checkpoints against the start ({unit} {first[unit]}), paired on the validation scenes",
                  ("checkpoint", "at", "start", "checkpoint", "difference", "solved only by start / checkpoint"),
                  rows, escape=False)


def _latest_with_videos(val_dir: Path) -> Path | None:
    folders = sorted(path for path in val_dir.glob("*") if any(path.glob("videos/*.mp4"))) if val_dir.is_dir() else []
    return folders[-1] if folders else None


def _gallery(evaluation: Path | None, base: Path) -> str:
    """Up to `GALLERY_PER_END` videos per end reason from an evaluation directory."""
    if evaluation is None or not any((evaluation / "videos").glob("*.mp4")):
        return "<h2>Episodes</h2><p>No episode videos in this run (evaluate with --video K).</p>"
    try:
        rows = read_episodes(evaluation)
    except CompareError:
        rows = {}
    chosen: dict[str, list[str]] = {}
    for (_, index), row in sorted(rows.items(), key=lambda item: item[0][1]):
        video = evaluation / "videos" / f"episode_{index:04d}.mp4"
        if video.is_file() and len(chosen.setdefault(row["end"], [])) < GALLERY_PER_END:
            src = html.escape(Path(os.path.relpath(video, base)).as_posix())
            caption = html.escape(f"scene {index}: {row['instruction']} -> {row['end']}")
            chosen[row["end"]].append(f'<figure><video src="{src}" controls muted loop preload="auto"></video>'
                                      f"<figcaption>{caption}</figcaption></figure>")
    items = "".join(f"<h3>{html.escape(end)}</h3><div class='gallery'>{''.join(videos)}</div>"
                    for end, videos in sorted(chosen.items(), key=lambda item: item[0] != "success"))
    return f"<h2>Episodes ({html.escape(evaluation.name)})</h2>{items}"


def _check(run: Path) -> str:
    result = _json(run / "check.json")
    if result is None:
        return "<h2>Self-check</h2><p>Not run yet (it runs on the first iteration).</p>"
    verdict = "passed" if result.get("passed") else "FAILED"
    detail = (run / "check.md").read_text() if (run / "check.md").is_file() else json.dumps(result, indent=2)
    return f"<h2>Self-check: {verdict}</h2><pre>{html.escape(detail)}</pre>"


def _arguments(path: Path) -> str:
    data = _json(path)
    text = json.dumps(data, indent=2) if data is not None else f"({path.name} missing or unreadable)"
    return f"<h2>Arguments</h2><pre>{html.escape(text)}</pre>"


# ---------------------------------------------------------------------------------------------- html
def _figure(title: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" src="data:image/png;base64,{data}">'


def _table(title: str, header: tuple, rows: list[tuple], escape: bool = True) -> str:
    def cell(value) -> str:
        return html.escape(str(value)) if escape else str(value)
    head = "".join(f"<th>{html.escape(name)}</th>" for name in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(value)}</td>" for value in row) + "</tr>" for row in rows)
    return f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{body}</table>"


def _rate(rate: float, interval) -> str:
    text = f"{100 * rate:.1f}%"
    return text + (f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]" if interval else "")


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


STYLE = """body{font-family:sans-serif;margin:2em;max-width:1400px}img{max-width:100%}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
.gallery{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}video{width:512px}pre{background:#f4f4f4;padding:1em}"""

CHECK_SCRIPT = """window.addEventListener('load', () => {
  const images = [...document.images], videos = [...document.querySelectorAll('video')];
  const imagesOk = images.filter(i => i.complete && i.naturalWidth > 0).length;
  const played = new Set();
  const report = () => { document.getElementById('page-check').textContent =
    `images ${imagesOk}/${images.length} decoded; videos ${played.size}/${videos.length} played`; };
  videos.forEach((v, i) => { v.addEventListener('timeupdate', () => { if (v.currentTime > 0) { played.add(i); report(); } });
    v.play().catch(() => {}); });
  report();
});"""


def _page(title: str, sections: list[str]) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"<p id='page-check'>page check pending</p>{''.join(sections)}"
            f"<script>{CHECK_SCRIPT}</script></body></html>\n")
