"""Policy speed: ms per action chunk, the encoder's share, re-evaluation from a stored prefix, training rate.
One JSON line.

    .venv/bin/python benchmarks/policy.py [--policies compact,smolvla] [--size tiny|real] [--device cpu|cuda]

Per policy and batch size (CPU: 1 and 10, the real SmolVLA 1 only; CUDA: 1, 16, 64), medians over repeats:
`lerobot_ms` LeRobot's own sampler (`VLAFlowMatching.sample_actions`, SmolVLA only), `ours_ms` our
deterministic sampler (`encode` + K `velocity` calls), `ours_noisy_ms` the ReinFlow chain, `encode_share`,
`velocity_ms` the K velocity calls of sampling alone, `reeval_forward_ms` / `reeval_fwd_bwd_ms` the same K
calls from a stored prefix (bfloat16 for SmolVLA, as rollouts keep it) with gradients, forward only /
forward + backward, and their ratios to `velocity_ms` (target for the forward: <= 1.1, issue #4, K = 10; it
runs no encoder). Training: `train_samples_per_s`, flow-matching loss forward + backward + AdamW step at
batch 8 with the prefix recomputed. Policies have random weights: speed does not depend on them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch

from chess_sim.policy.base import flow_matching_loss, noise_schedule, sample_chain, sample_chunk, time_grid
from chess_sim.policy.compact import CompactPolicy

TASKS = ["Move the white knight from g1 to f3.", "Move the black pawn from e7 to e5."]


def make_batch(size: int, pixels: int, device: str) -> dict:
    generator = torch.Generator().manual_seed(size)
    images = lambda: torch.rand(size, 3, pixels, pixels, generator=generator).to(device)  # noqa: E731
    return {"observation.images.front": images(), "observation.images.wrist": images(),
            "observation.state": (torch.randn(size, 6, generator=generator) * 30.0).to(device),
            "task": [TASKS[i % len(TASKS)] for i in range(size)]}


def median_ms(function, repeats: int, device: str) -> float:
    """Median wall time of `function()` in ms, after one warm-up call."""
    times = []
    for repeat in range(repeats + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        if device == "cuda":
            torch.cuda.synchronize()
        if repeat:
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def store(prefix: dict) -> dict:
    """A prefix as rollouts keep it: SmolVLA's floating tensors in bfloat16."""
    return {key: value.bfloat16() if value.is_floating_point() and value.ndim > 2 else value
            for key, value in prefix.items()}


def chunk_timings(policy, size: int, pixels: int, device: str, repeats: int, smolvla: bool) -> dict:
    batch = make_batch(size, pixels, device)
    x0 = torch.randn(size, policy.chunk, policy.chain_dim, device=device)
    steps = policy.steps
    draws = torch.randn(size, steps, policy.chunk, policy.chain_dim, device=device)
    sigmas = noise_schedule(0.1, 0.01, steps).to(device)
    row = {}
    with torch.no_grad():
        if smolvla:
            def lerobot():
                policy.lerobot.model.sample_actions(**policy.lerobot_inputs(batch), noise=x0.clone())
            row["lerobot_ms"] = median_ms(lerobot, repeats, device)
        row["ours_ms"] = median_ms(lambda: sample_chunk(policy, policy.encode(batch), x0), repeats, device)
        row["ours_noisy_ms"] = median_ms(lambda: sample_chain(policy, policy.encode(batch), x0, sigmas, draws),
                                         repeats, device)
        encode_ms = median_ms(lambda: policy.encode(batch), repeats, device)
        prefix = policy.encode(batch)
        chain = sample_chain(policy, prefix, x0)
        row["velocity_ms"] = median_ms(lambda: sample_chunk(policy, prefix, x0), repeats, device)
    row["encode_share"] = encode_ms / row["ours_ms"]
    stored, times = store(prefix) if smolvla else prefix, time_grid(steps, device, power=policy.time_power)

    def reevaluate(backward: bool):
        with torch.enable_grad():
            total = sum(policy.velocity(stored, chain[:, k], times[k].expand(size)).square().mean()
                        for k in range(steps))
            if backward:
                total.backward()
    row["reeval_forward_ms"] = median_ms(lambda: reevaluate(False), repeats, device)
    row["reeval_fwd_bwd_ms"] = median_ms(lambda: reevaluate(True), repeats, device)
    policy.zero_grad(set_to_none=True)
    row["reeval_forward_ratio"] = row["reeval_forward_ms"] / row["velocity_ms"]
    row["reeval_fwd_bwd_ratio"] = row["reeval_fwd_bwd_ms"] / row["velocity_ms"]
    return row


def training_rate(policy, pixels: int, device: str, repeats: int, size: int = 8) -> float:
    batch = make_batch(size, pixels, device)
    actions = torch.randn(size, policy.chunk, policy.action_dim, device=device)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-5)
    policy.train()

    def step():
        noise = torch.randn(size, policy.chunk, policy.chain_dim, device=device)
        loss = flow_matching_loss(policy, policy.encode(batch), actions, noise, torch.rand(size, device=device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ms = median_ms(step, repeats, device)
    policy.eval()
    return 1000 * size / ms


def build(name: str, size: str, device: str, workdir: str):
    if name == "compact":
        return CompactPolicy().to(device).eval(), 96
    from chess_sim.policy.smolvla_build import build_real_smolvla, build_tiny_smolvla

    if size == "tiny":
        return build_tiny_smolvla(workdir, device=device).eval(), 64
    return build_real_smolvla(workdir, device=device).eval(), 512


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policies", default="compact,smolvla", help="comma-separated: compact, smolvla")
    parser.add_argument("--size", choices=["tiny", "real"], default="tiny", help="SmolVLA size")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of torch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    report = {"cpus": os.cpu_count(), "threads": args.threads, "device": args.device, "steps_K": 10,
              "reeval_forward_target": 1.1}
    if args.device == "cuda":
        report["gpu"] = torch.cuda.get_device_name()
    for name in args.policies.split(","):
        with tempfile.TemporaryDirectory() as workdir:
            policy, pixels = build(name, args.size, args.device, workdir)
            real_cpu = name == "smolvla" and args.size == "real" and args.device == "cpu"
            sizes = [1, 16, 64] if args.device == "cuda" else [1] if real_cpu else [1, 10]
            repeats = 2 if real_cpu else args.repeats
            entry = {"parameters": sum(p.numel() for p in policy.parameters()),
                     "trainable_parameters": sum(p.numel() for p in policy.parameters() if p.requires_grad)}
            if name == "smolvla":
                entry["size"] = args.size
                prefix = policy.encode(make_batch(1, pixels, args.device))
                entry["prefix_bytes_bf16"] = sum(v.numel() * (2 if v.is_floating_point() else v.element_size())
                                                 for v in prefix.values())
            entry["batches"] = {str(size): chunk_timings(policy, size, pixels, args.device, repeats,
                                                         name == "smolvla") for size in sizes}
            entry["train_samples_per_s"] = training_rate(policy, pixels, args.device, repeats)
            report[name if name == "compact" else f"smolvla_{args.size}"] = entry
    print(json.dumps(report))


if __name__ == "__main__":
    main()
