"""The rollouts' chain in a lower precision against float32, on the test scenes (issue #21). Prints one JSON object.

    .venv/bin/python benchmarks/chain_precision.py [--policy models/baseline] [--episodes 600]
                                                   [--chain-dtype bfloat16] [--out DIR]

Evaluates the policy noise-free on the first `episodes` test scenes twice, as `chess-sim eval` does: with its own
float32 chain, and with its chain in `--chain-dtype` (`policy.precision.LoweredChain`: what `chess-sim rl` samples
its rollouts with under the compact profile; evaluations never do), then pairs the two as `chess-sim eval --compare`
does: each one's success, the scenes only one of them solved, McNemar's p. The two evaluations stay in `--out`
(`float32/`, `<dtype>/`; default: a temporary directory), for `chess-sim eval --compare`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import CHAIN_DTYPES, EvalConfig, profile  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402
from chess_sim.policy.loading import load_policy  # noqa: E402
from chess_sim.policy.precision import lowered_chain  # noqa: E402
from chess_sim.report.compare import compare  # noqa: E402


class _LoweredPolicy:
    """The policy as an evaluation sees it, its chain's velocity calls made by `lowered` instead."""

    def __init__(self, policy, lowered):
        self.policy, self.lowered = policy, lowered
        self.chunk, self.action_steps, self.action_dim = policy.chunk, policy.action_steps, policy.action_dim
        self.chain_dim, self.steps, self.time_power = policy.chain_dim, policy.steps, policy.time_power
        self.image_size, self.normalizer = policy.image_size, policy.normalizer

    def encode(self, batch):
        return self.policy.encode(batch)

    def start_distribution(self, prefix):
        return self.policy.start_distribution(prefix)

    def prepare_chain(self, prefix):
        return self.lowered.prepare_chain(prefix)

    def velocity(self, prefix, x_t, t):
        return self.lowered.velocity(prefix, x_t, t)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline"))
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--chain-dtype", choices=[name for name in CHAIN_DTYPES if name != "float32"],
                        default="bfloat16")
    parser.add_argument("--out", type=Path, default=None, help="keep the evaluations here (an empty directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        cfg, env = EvalConfig(episodes=args.episodes), profile("baseline")
        began = time.perf_counter()
        evaluate(args.policy, out / "float32", cfg, env)
        float32_s = time.perf_counter() - began
        policy = load_policy(args.policy)
        lowered = _LoweredPolicy(policy, lowered_chain(policy, args.chain_dtype))
        began = time.perf_counter()
        evaluate(lowered, out / args.chain_dtype, cfg, env, label=f"{args.policy} ({args.chain_dtype} chain)")
        lowered_s = time.perf_counter() - began
        paired = compare(out / "float32", out / args.chain_dtype)
    print(json.dumps({"policy": str(args.policy), "episodes": args.episodes, "chain_dtype": args.chain_dtype,
                      "success_float32": paired["success_a"], "success_lowered": paired["success_b"],
                      "difference": paired["difference"], "only_float32": paired["only_a"],
                      "only_lowered": paired["only_b"], "mcnemar_p": paired["mcnemar_p"],
                      "eval_s": {"float32": float32_s, args.chain_dtype: lowered_s}}, indent=2))


if __name__ == "__main__":
    main()
