"""Paired comparison of evaluations of the same scenes (`chess-sim eval --compare A B [C ...]`).

The evaluations ran the same scenes with the same x_0 draws, so each scene is a pair of outcomes; the
difference in success is tested with the exact McNemar test on the discordant pairs. More than two evaluations
make a table (an ablation): each against the first.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from chess_sim.report.summary import mcnemar, wilson


class CompareError(Exception):
    """Inputs that cannot be compared (one-line message for the CLI)."""


def read_episodes(directory: Path) -> dict[tuple[int, int], dict]:
    """{(seed, index): row} of an evaluation directory's `episodes.csv`."""
    path = Path(directory) / "episodes.csv"
    if not path.is_file():
        raise CompareError(f"{directory} is not an evaluation directory (no episodes.csv)")
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or not {"seed", "index", "end", "instruction"} <= set(rows[0]):
        raise CompareError(f"{path} has no episode rows with seed, index, end and instruction columns")
    try:
        return {(int(row["seed"]), int(row["index"])): row for row in rows}
    except (TypeError, ValueError):
        raise CompareError(f"{path} has a row whose seed or index is not a whole number") from None


def compare(a: Path, b: Path) -> dict:
    """Success of A and B on their common scenes, the difference B - A, McNemar's p-value, and the scenes
    whose outcome changed. Scenes must match exactly: a comparison of different scenes is not paired."""
    rows_a, rows_b = read_episodes(a), read_episodes(b)
    if set(rows_a) != set(rows_b):
        raise CompareError(f"{a} and {b} evaluated different scenes ({len(rows_a)} vs {len(rows_b)} episodes, "
                           f"{len(set(rows_a) & set(rows_b))} in common); a paired comparison needs the same ones")
    for key in rows_a:
        if rows_a[key]["instruction"] != rows_b[key]["instruction"]:
            raise CompareError(f"scene {key} has different instructions in {a} and {b} (other profiles?)")
    keys = sorted(rows_a)
    won_a = [rows_a[key]["end"] == "success" for key in keys]
    won_b = [rows_b[key]["end"] == "success" for key in keys]
    only_a = sum(x and not y for x, y in zip(won_a, won_b))
    only_b = sum(y and not x for x, y in zip(won_a, won_b))
    n = len(keys)
    changed = [{"seed": key[0], "index": key[1], "instruction": rows_a[key]["instruction"],
                "a": rows_a[key]["end"], "b": rows_b[key]["end"]}
               for key in keys if rows_a[key]["end"] != rows_b[key]["end"]]
    return {"a": str(a), "b": str(b), "episodes": n,
            "success_a": sum(won_a) / n, "success_a_ci": list(wilson(sum(won_a), n)),
            "success_b": sum(won_b) / n, "success_b_ci": list(wilson(sum(won_b), n)),
            "difference": (sum(won_b) - sum(won_a)) / n, "only_a": only_a, "only_b": only_b,
            "mcnemar_p": mcnemar(only_a, only_b), "changed": changed}


def comparison_table(result: dict, limit: int = 20) -> str:
    lines = [f"paired comparison on {result['episodes']} scenes",
             f"  A {result['a']}: success {100 * result['success_a']:.1f}%  "
             f"[{100 * result['success_a_ci'][0]:.1f}, {100 * result['success_a_ci'][1]:.1f}]",
             f"  B {result['b']}: success {100 * result['success_b']:.1f}%  "
             f"[{100 * result['success_b_ci'][0]:.1f}, {100 * result['success_b_ci'][1]:.1f}]",
             f"  B - A {100 * result['difference']:+.1f} points; solved only by A {result['only_a']}, only by B "
             f"{result['only_b']}; exact McNemar p = {result['mcnemar_p']:.4g}"]
    for row in result["changed"][:limit]:
        lines.append(f"    scene {row['index']:>4}  {row['a']:>9} -> {row['b']:<9} {row['instruction']}")
    if len(result["changed"]) > limit:
        lines.append(f"    ... {len(result['changed']) - limit} more changed outcomes (see --json)")
    return "\n".join(lines)


def compare_many(folders: list[Path]) -> dict:
    """Each evaluation after the first against the first (`compare`), with its own summary's success by piece and
    its failure ends: {"reference": first folder, "rows": [one per folder, the first included]}."""
    reference = Path(folders[0])
    rows = []
    for folder in map(Path, folders):
        summary_path = folder / "summary.json"
        if not summary_path.is_file():
            raise CompareError(f"{folder} is not a finished evaluation (no summary.json)")
        try:
            summary = json.loads(summary_path.read_text())
            row = {"evaluation": str(folder), "episodes": summary["episodes"], "success": summary["success"],
                   "success_ci": summary["success_ci"], "success_pawn": summary["success_pawn"],
                   "success_knight": summary["success_knight"], "ends": summary["ends"]}
        except (ValueError, KeyError, TypeError) as error:
            raise CompareError(f"{summary_path} is not an evaluation summary ({error!r})") from None
        if folder != reference:
            paired = compare(reference, folder)
            row.update({key: paired[key] for key in ("difference", "only_a", "only_b", "mcnemar_p")})
        rows.append(row)
    return {"reference": str(reference), "rows": rows}


def ablation_table(result: dict) -> str:
    """A Markdown table of `compare_many`'s result."""
    def percent(value) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    lines = ["| evaluation | success [Wilson 95%] | pawn | knight | disturbed | toppled | vs the first: points, "
             "discordant (first / this), McNemar p |", "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        low, high = row["success_ci"]
        versus = ("reference" if "difference" not in row else
                  f"{100 * row['difference']:+.1f}, {row['only_a']} / {row['only_b']}, p = {row['mcnemar_p']:.2g}")
        lines.append(f"| {row['evaluation']} | {percent(row['success'])} [{100 * low:.1f}, {100 * high:.1f}] | "
                     f"{percent(row['success_pawn'])} | {percent(row['success_knight'])} | "
                     f"{row['ends']['disturbed']} | {row['ends']['toppled']} | {versus} |")
    return "\n".join(lines)
