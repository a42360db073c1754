"""DAgger's labels without DAgger's states (issue #20): takeovers recorded from the expert's OWN states.

The expert drives each scene chunk by chunk (50 steps, as a policy would) and, before every `--branch-every`-th
chunk, a fresh expert takes over on a copy, exactly as `chess-sim record --policy` does from a policy's states. The
states are the demonstrations' own, so training on demonstrations + these takeovers, against the same training on
the demonstrations alone, measures what the fresh expert's labels cost by themselves. Writes a LeRobot dataset
(resumable, like `record`) and prints the recording's summary as one JSON object.

    .venv/bin/python benchmarks/self_dagger.py OUT [--episodes 60] [--seed 7701003] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import CHUNK, DaggerConfig, RecordConfig, profile  # noqa: E402
from chess_sim.data.record import record  # noqa: E402
from chess_sim.imitation.dagger import Dagger, branched_episode  # noqa: E402
from chess_sim.sim.expert import ExpertDriver  # noqa: E402


@dataclass(frozen=True)
class ExpertDrives(Dagger):
    """A DAgger recording whose driver is the scripted expert itself (no policy is loaded)."""

    def setup(self):
        return None

    def scene(self, env, expert, _, seed: int, index: int):
        driver = ExpertDriver(env)
        observation, info = env.reset(seed=seed, options={"index": index})
        return branched_episode(env, expert, index, self, lambda *_: driver.chunk(CHUNK), observation, info)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7_701_003, help="DAgger round 1's scenes")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--branch-every", type=int, default=2)
    parser.add_argument("--branch-steps", type=int, default=100)
    args = parser.parse_args()
    if min(args.episodes, args.workers, args.branch_every, args.branch_steps) < 1:
        parser.error("--episodes, --workers, --branch-every and --branch-steps must be >= 1")
    source = ExpertDrives("expert", DaggerConfig(branch_every=args.branch_every, branch_steps=args.branch_steps))
    summary = record(args.out, profile("baseline"), RecordConfig(), args.seed, args.episodes, workers=args.workers,
                     resume=(args.out / "meta").exists(), source=source)
    print(json.dumps({key: summary[key] for key in ("dataset", "episodes_saved", "episodes_failed",
                                                     "failures_by_end", "frames_this_run", "policy_success",
                                                     "seconds")}, indent=2))


if __name__ == "__main__":
    main()
