"""Episode rows -> the summary every verb reports (docs/design.md keys), with Wilson intervals for the rates."""

from __future__ import annotations

import math
from collections import Counter
from statistics import median

from chess_sim.sim.judge import ENDS
from chess_sim.sim.tasks import PIECES


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial rate (95% by default); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(rows: list[dict]) -> dict:
    """Rows need `end`, `piece`, `return`, `clean_lift`, `close_lateral_mm`, `place_error_mm`."""
    n = len(rows)
    ends = Counter(row["end"] for row in rows)
    out: dict = {"episodes": n}

    def rate(name: str, hits: int, total: int) -> None:
        out[name] = hits / total if total else None
        out[f"{name}_ci"] = list(wilson(hits, total))

    rate("success", ends["success"], n)
    out["return"] = sum(row["return"] for row in rows) / n if n else None
    rate("clean_lift", sum(bool(row["clean_lift"]) for row in rows), n)
    rate("disturbed", ends["disturbed"], n)
    rate("toppled", ends["toppled"], n)
    for piece in PIECES:
        subset = [row for row in rows if row["piece"] == piece]
        rate(f"success_{piece}", sum(row["end"] == "success" for row in subset), len(subset))
    out["close_mm_median"] = _median(row["close_lateral_mm"] for row in rows)
    out["place_error_mm_median"] = _median(row["place_error_mm"] for row in rows if row["end"] == "success")
    out["ends"] = {end: ends[end] for end in ENDS}
    out["ends_ci"] = {end: list(wilson(ends[end], n)) for end in ENDS}
    return out


def mcnemar(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar test: the p-value of `only_a` vs `only_b` discordant pairs (episodes that one
    policy solved and the other did not) under the null of no difference, i.e. a fair-coin binomial."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _median(values) -> float | None:
    finite = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(median(finite)) if finite else None
