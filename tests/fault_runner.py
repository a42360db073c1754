"""One tiny run of a verb, for the fault tier (`test_faults.py`), which kills it with SIGKILL and resumes it.

    python tests/fault_runner.py VERB OUT POLICY DATASET [--resume]
"""

import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import (CameraConfig, CompactConfig, EvalConfig, RecordConfig, RLConfig,  # noqa: E402
                              TrainConfig, profile, replace_fields)

ENV = replace(profile("baseline"), episode_seconds=2.0, camera=CameraConfig(64, 64))
"""Short episodes for the policies; the recording keeps the expert's full 20 s, or it would save nothing."""
EVAL = EvalConfig(episodes=8, envs=2)
"""Four batches, so a kill can land between two of them."""
RECORD = RecordConfig(recovery_fraction=0.5)
RL = replace_fields(RLConfig(), iterations=2, episodes=2, envs=2, val_episodes=2, val_every=1, save_every=2,
                    minibatch=4, epochs=1, lr=1e-4, critic_warmup=1, torch_threads=1)
TRAIN = TrainConfig(steps=40, batch_size=8, lr=3e-3, warmup_steps=5, val_every=0, val_episodes=0, save_every=10,
                    log_every=5, loader_workers=0)
SMALL = CompactConfig(image_size=32, width=32, layers=1, heads=2)


def main(verb: str, out: Path, policy: Path, dataset: Path, resume: bool) -> None:
    if verb == "eval":
        from chess_sim.eval import evaluate

        evaluate(policy, out, EVAL, ENV, resume=resume)
    elif verb == "record":
        from chess_sim.data.record import record

        record(out, replace(ENV, episode_seconds=20.0), RECORD, 7_700_003, 2, workers=1, resume=resume)
    elif verb == "rl":
        from chess_sim.rl.runner import run

        run(policy, out, RL, ENV, resume=resume)
    elif verb == "train":
        from chess_sim.imitation.bc import train

        train(dataset, out, TRAIN, SMALL, resume=resume)
    else:
        raise SystemExit(f"unknown verb {verb}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), "--resume" in sys.argv[5:])
