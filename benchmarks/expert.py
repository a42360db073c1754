"""Scripted-expert benchmark: success over N scenes per profile and task profile (targets: >= 98% baseline,
>= 95% randomized, median placement error <= 3 mm; per piece type). Prints one JSON object, one entry per
profile ("baseline") or profile and task profile ("baseline/all-pieces").

    .venv/bin/python benchmarks/expert.py [--episodes 300] [--workers 2] [--seed 5500001]
                                          [--profiles baseline randomized] [--tasks pawn-knight all-pieces]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from collections import Counter

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import PROFILES, TASK_PROFILES, TEST_SEED, SceneConfig, profile  # noqa: E402
from chess_sim.sim.episodes import run_expert_episodes  # noqa: E402
from chess_sim.sim.tasks import PIECES  # noqa: E402
from chess_sim.report.summary import summarize  # noqa: E402

TARGETS = {"baseline": 0.98, "randomized": 0.95}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=TEST_SEED)
    parser.add_argument("--profiles", nargs="+", default=list(TARGETS), choices=sorted(PROFILES))
    parser.add_argument("--tasks", nargs="+", default=[SceneConfig.tasks], choices=TASK_PROFILES)
    args = parser.parse_args()
    report = {"episodes_per_profile": args.episodes, "seed": args.seed, "workers": args.workers}
    for name, tasks in itertools.product(args.profiles, args.tasks):
        label = name if tasks == SceneConfig.tasks else f"{name}/{tasks}"
        start = time.perf_counter()
        rows = run_expert_episodes(profile(name, tasks), args.seed, args.episodes, workers=args.workers, label=label)
        seconds = time.perf_counter() - start
        summary = summarize(rows)
        failures = [{k: row[k] for k in ("index", "instruction", "end")} for row in rows if row["end"] != "success"]
        report[label] = {
            "success": summary["success"], "success_ci": summary["success_ci"],
            **{f"success_{piece}": summary[f"success_{piece}"] for piece in PIECES},
            "episodes_per_piece": dict(Counter(row["piece"] for row in rows)),
            "place_error_mm_median": summary["place_error_mm_median"],
            "close_mm_median": summary["close_mm_median"], "ends": summary["ends"],
            "target": TARGETS.get(name), "meets_target": summary["success"] >= TARGETS.get(name, 0.0)
            and (summary["place_error_mm_median"] or 99.0) <= 3.0,
            "episodes_per_s": args.episodes / seconds, "seconds": seconds, "failures": failures,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
