"""Terminal tables and CSV files of episode outcomes."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from chess_sim import atomic
from chess_sim.report.summary import ENDS
from chess_sim.sim.tasks import PIECES


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def _ci(pair) -> str:
    return f"[{100 * pair[0]:4.1f}, {100 * pair[1]:5.1f}]"


def outcome_table(summary: dict) -> str:
    """One screen: rates with 95% Wilson intervals, end reasons, medians."""
    lines = [f"episodes {summary['episodes']}"]
    # pawns and knights always (the default tasks), other pieces when the scenes had them
    pieces = [f"success_{piece}" for piece in PIECES
              if piece in ("pawn", "knight") or summary.get(f"success_{piece}") is not None]
    for key in ("success", *pieces, "clean_lift", "disturbed", "toppled"):
        lines.append(f"  {key:<16}{_pct(summary[key])}  95% CI {_ci(summary[key + '_ci'])}")
    ends = "  ".join(f"{end} {summary['ends'].get(end, 0)}" for end in ENDS)  # older summaries lack later ends
    lines.append(f"  ends            {ends}")
    for key in ("close_mm_median", "place_error_mm_median"):
        value = summary.get(key)
        lines.append(f"  {key:<22}{'-' if value is None else f'{value:.2f} mm'}")
    lines.append(f"  return (mean)         {summary['return']:.3f}" if summary["return"] is not None else "")
    return "\n".join(line for line in lines if line)


def write_csv(path: Path, rows: list[dict]) -> None:
    """Atomic write of one row per episode; columns in the order of the first row."""
    if not rows:
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else (f"{v:.4f}" if isinstance(v, float) else v)) for k, v in row.items()})
    atomic.write_text(path, buffer.getvalue())
