"""The likelihood and determinism self-check of RL fine-tuning (`chess-sim rl-check`, and before the first update
of every `chess-sim rl` run), on a fresh rollout's first decisions (each algorithm's `check` calls `self_check`):

1. the policy is in eval mode (no dropout or other train-time behaviour while sampling or re-evaluating);
2. the noise-free sampler is deterministic and equals the policy's own sampler (`sample_chunk`);
3. with the rollouts' chain in a lower precision, that chain is deterministic too (its distance from float32's is
   reported);
4. where the rollout kept log-probs (an algorithm that compares likelihoods): log-probs re-evaluated from storage
   equal the rollout's within float32 rounding (`log_prob_tolerance`), hence ratio 1 and approximate KL 0 before any
   update; and after one small update (on a copy), how far per-element, per-step (one row summed) and per-chunk
   log-probs move: why each element gets its own clipped ratio.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch

from chess_sim import atomic
from chess_sim.policy.base import cast_prefix, sample_chunk
from chess_sim.policy.precision import LoweredChain
from chess_sim.rl.clipped_loss import approx_kl, clipped_policy_loss, element_log_ratios
from chess_sim.rl.flow_rl import FlowRL, RolloutSpec

MEAN_ROUNDING = 1e-5
"""Accepted float32 discrepancy of a transition's mean times its standardised noise (chain units). Sampling
runs B rows and re-evaluation B*K rows, so the velocity's rounding differs (~1e-6 for chain values of a few
units); an element's log-prob then differs by |noise| * discrepancy / sigma, largest at the smallest sigma."""


def log_prob_tolerance(sigmas: torch.Tensor) -> float:
    """Largest accepted |re-evaluated - rollout| log-prob difference, nats per element: `MEAN_ROUNDING` over the
    smallest noise size (K, C)."""
    return MEAN_ROUNDING / float(sigmas.min())


def self_check(model: FlowRL, storage, lowered: LoweredChain | None = None, sigmas: torch.Tensor | None = None,
               lrs: dict[str, float] | None = None, clip: float = 0.2, decisions: int = 8) -> dict:
    """Run the checks on up to `decisions` stored decisions; `passed` says whether all hard checks hold. `lowered`:
    the rollouts' chain in a lower precision, if any. With the chain's noise sizes `sigmas` (K, C) the stored
    log-probs are checked too, and the trial update moves each of the policy's parameter sets at its learning rate
    in `lrs`, as the run's optimizer does."""
    index = torch.arange(min(decisions, len(storage)))
    chain, prefix, state, old = storage.minibatch(index)
    scored = sigmas is not None
    assert not scored or old is not None, "a check of the likelihoods needs a rollout that kept its log-probs"
    spreads = storage.spreads(index) if scored else None
    drawn = None if spreads is None else spreads[0]
    eval_mode = not any(module.training for module in model.modules())
    x0 = chain[:, 0]
    noise_free = RolloutSpec()
    first = model.sample_from_prefix(prefix, state, x0, None, None, noise_free).chain[:, -1]
    second = model.sample_from_prefix(prefix, state, x0, None, None, noise_free).chain[:, -1]
    with torch.no_grad():
        own = sample_chunk(model.policy, cast_prefix(prefix, torch.float32), x0)
    result = {
        "decisions": len(index),
        "scored": scored,
        "eval_mode": eval_mode,
        "noise_free_deterministic": bool(torch.equal(first, second)),
        "noise_free_vs_policy_sampler_max_abs_diff": float((first - own).abs().max()),
        "rollout_chain_dtype": "float32" if lowered is None else str(lowered.dtype).removeprefix("torch."),
    }
    if lowered is not None:
        spec = RolloutSpec(lowered=lowered)
        twice = [model.sample_from_prefix(prefix, state, x0, None, None, spec).chain[:, -1] for _ in range(2)]
        result["rollout_chain_deterministic"] = bool(torch.equal(*twice))
        result["rollout_chain_vs_float32_max_abs_diff"] = float((twice[0] - first).abs().max())
    if scored:
        with torch.no_grad():
            log_ratios = model.evaluate(chain, prefix, sigmas, drawn) - old
            if spreads is not None:  # the drawn spreads' log-densities are checked alongside the chain's
                log_ratios = torch.cat([log_ratios.flatten(),
                                        (model.spread_log_probs(drawn, prefix) - spreads[1]).flatten()])
        result.update({"log_prob_max_abs_diff": float(log_ratios.abs().max()),
                       "log_prob_tolerance": log_prob_tolerance(sigmas),
                       "ratio_max_abs_dev": float((log_ratios.exp() - 1).abs().max()),
                       "kl": float(approx_kl(log_ratios))})
        result.update(_one_update_shift(model, chain, prefix, old, sigmas, lrs, clip, drawn))
    result["passed"] = ((not scored or result["log_prob_max_abs_diff"] <= result["log_prob_tolerance"]) and eval_mode
                        and result["noise_free_deterministic"] and result.get("rollout_chain_deterministic", True)
                        and result["noise_free_vs_policy_sampler_max_abs_diff"] <= 1e-5)
    return result


def _one_update_shift(model: FlowRL, chain, prefix, old, sigmas: torch.Tensor, lrs: dict[str, float], clip: float,
                      drawn: torch.Tensor | None) -> dict:
    """One Adam step of the per-element PPO loss (unit advantages of alternating sign) on a copy of the model;
    how much log-probs then move at each granularity, and the share of ratios outside the clip range. Only the
    elements an update scores count (`FlowRL.scored_mask`: not the unexecuted actions of a shorter chunk)."""
    trial = copy.deepcopy(model)
    sets = trial.policy_parameter_sets()
    optimizer = torch.optim.Adam([{"params": params, "lr": lrs[name]} for name, params in sets.items()])
    advantages = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(chain.shape[0])])
    new = trial.evaluate(chain, prefix, sigmas, drawn)
    scored = model.scored_mask()
    clipped_policy_loss(element_log_ratios(new, old, scored), advantages, clip)["pg_loss"].backward()
    optimizer.step()
    with torch.no_grad():
        moved = trial.evaluate(chain, prefix, sigmas, drawn) - old
    if scored is not None:
        moved = moved * scored
    shift = {}
    for mode, dims in (("element", None), ("step", (2, 3)), ("chunk", (1, 2, 3))):
        change = element_log_ratios(moved, torch.zeros_like(moved), scored) if dims is None else moved.sum(dim=dims)
        shift[f"shift_{mode}_median_nats"] = float(change.abs().median())
        shift[f"shift_{mode}_max_nats"] = float(change.abs().max())
        shift[f"outside_clip_{mode}"] = float(((change.exp() - 1).abs() > clip).float().mean())
    shift["update_lrs"] = {name: lrs[name] for name in sets}
    return shift


def write_report(result: dict, out: Path) -> None:
    """`check.json` and a short `check.md` in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "check.json", json.dumps(result, indent=2, sort_keys=True) + "\n")
    verdict = "PASSED" if result["passed"] else "FAILED"
    lines = [
        f"# RL self-check: {verdict}", "",
        f"On {result['decisions']} decisions of a fresh rollout:", "",
        f"- policy in eval mode: {result['eval_mode']}",
        f"- noise-free sampler deterministic: {result['noise_free_deterministic']}; equal to the policy's own "
        f"sampler within {result['noise_free_vs_policy_sampler_max_abs_diff']:.2e}",
    ]
    if "rollout_chain_deterministic" in result:
        lines.append(f"- the rollouts' chain in {result['rollout_chain_dtype']}: deterministic: "
                     f"{result['rollout_chain_deterministic']}; its rounding moves the chain's end by up to "
                     f"{result['rollout_chain_vs_float32_max_abs_diff']:.2e} from the float32 one")
    if not result.get("scored", True):
        lines.append("- the rollout kept no log-probs (its update compares no likelihoods): nothing else to check")
        atomic.write_text(out / "check.md", "\n".join(lines) + "\n")
        return
    lines += [
        f"- re-evaluated vs rollout log-probs: max |diff| {result['log_prob_max_abs_diff']:.2e} nats "
        f"(tolerance {result['log_prob_tolerance']:.0e}); max |ratio - 1| {result['ratio_max_abs_dev']:.2e}; "
        f"approx KL {result['kl']:.2e}",
        f"- after one update ({_rates(result['update_lrs'])}), |log-prob change| median / max: per element "
        f"{result['shift_element_median_nats']:.3g} / {result['shift_element_max_nats']:.3g} nats, per step "
        f"{result['shift_step_median_nats']:.3g} / {result['shift_step_max_nats']:.3g}, per chunk "
        f"{result['shift_chunk_median_nats']:.3g} / {result['shift_chunk_max_nats']:.3g}. Ratios outside the "
        f"clip range: {100 * result['outside_clip_element']:.1f}% of elements, "
        f"{100 * result['outside_clip_step']:.1f}% of steps, {100 * result['outside_clip_chunk']:.1f}% of chunks "
        f"- why every element has its own clipped ratio.",
    ]
    atomic.write_text(out / "check.md", "\n".join(lines) + "\n")


def _rates(lrs: dict[str, float]) -> str:
    return ", ".join(f"{name.replace('_', ' ')} lr {lr:.0e}" for name, lr in lrs.items())
