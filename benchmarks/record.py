"""Recording speed: frames/s with 2 workers and the share of time in physics, rendering and encoding.
Target (issue #3): 200 episodes in under 20 minutes. Prints one JSON object.

    .venv/bin/python benchmarks/record.py [--episodes 30] [--workers 2]

The 200-episode time is extrapolated from this run's seconds per attempted scene (state it as such), unless
--episodes 200 is given.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import TRAIN_SEED, RecordConfig, profile  # noqa: E402
from chess_sim.data.record import record  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        summary = record(Path(tmp) / "bench", profile("baseline"), RecordConfig(), TRAIN_SEED, args.episodes,
                         workers=args.workers)
    per_scene = summary["seconds"] / summary["scenes_attempted"]
    print(json.dumps({
        "episodes": args.episodes, "workers": args.workers, "saved": summary["episodes_saved"],
        "failed": summary["episodes_failed"], "frames": summary["frames_this_run"],
        "seconds": summary["seconds"], "frames_per_s": summary["frames_per_s"],
        "time_share": summary["time_share"],
        "minutes_for_200_episodes": 200 * per_scene / 60, "extrapolated": args.episodes != 200,
        "target_minutes": 20,
    }))


if __name__ == "__main__":
    main()
