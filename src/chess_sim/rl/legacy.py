"""What a resume compares (`run_defining`), and the `args.json` of runs begun before RL had one module per
algorithm, read in today's layout. Such a run resumes when its settings are still in the core; one that used a
setting that left it is refused in one line naming the last commit that resumes it."""

from __future__ import annotations

from chess_sim.config import FilteredConfig, PPOConfig, RunConfig
from chess_sim.runs import RunError

LAST_COMMIT = "0b5ba4f"
"""The last commit with PPO on the flow surrogate, step and chunk ratios, learned noise sizes and a rollout spread
other than 1 (docs/experiments.md)."""

_PPO_FIELDS = ("gamma", "lam", "epochs", "minibatch", "clip", "push_away", "vf_coef", "target_kl", "lr", "critic_lr",
               "critic_warmup")
_FILTERED_FIELDS = ("fit_lr", "fit_epochs", "fit_minibatch", "fit_warmup", "fit_threads", "anchor")


def run_defining(args: dict) -> dict:
    """What a resume must keep: the RL settings but the budget (iterations, minutes), the rewards and the
    environment (the policy comes from `last/` and the profile only filled in the settings)."""
    rl = current_layout(args["rl"])
    return {"rl": {**rl, "run": {**rl["run"], "iterations": 0, "minutes": 0}}, "reward": args["reward"],
            "env": args["env"]}


def current_layout(rl: dict) -> dict:
    """An `args.json` RL tree in today's layout (`RLConfig.as_dict`); RunError for an older run whose settings
    left the core."""
    if "optim" in rl:
        return rl
    algorithm, ppo, noise = rl.get("algorithm", "ppo"), rl["ppo"], rl["noise"]
    filtered, start, run = rl.get("filtered", {}), rl["start"], dict(rl["run"])
    left = [name for name, gone in (
        ("PPO on the flow surrogate", algorithm == "ppo" and ppo.get("likelihood", "chain") != "chain"),
        (f"ratio {ppo.get('ratio')}", ppo.get("ratio", "element") != "element"),
        ("learned noise sizes", noise.get("learn_sigma", False)),
        (f"rollout spread {filtered.get('rollout_spread')}", filtered.get("rollout_spread", 1.0) != 1.0)) if gone]
    if left:
        raise RunError(f"this run used {', '.join(left)}, which left chess-sim; resume it with commit {LAST_COMMIT}")
    chain_dtype = run.pop("chain_dtype", "float32")
    for name in ("denoise_steps", "time_power", "policy_in_simulators"):  # settings added while the run was young
        run.setdefault(name, getattr(RunConfig, name))
    layout = {"algorithm": algorithm, "run": run,
              "start": {"steer": start["steer"], "initial_spread": start["initial_spread"]},
              "optim": {"max_grad_norm": ppo["max_grad_norm"], "ema": ppo.get("ema", 0.0)}}
    if algorithm == "filtered":
        layout["filtered"] = {**{name: filtered.get(name, getattr(FilteredConfig, name)) for name in _FILTERED_FIELDS},
                              "fit_draws": ppo.get("flow_draws", FilteredConfig.fit_draws), "chain_dtype": chain_dtype,
                              "group_size": 1}  # every scene once: groups came later
    else:
        layout["ppo"] = {**{name: ppo.get(name, getattr(PPOConfig, name)) for name in _PPO_FIELDS},
                         "sigma_start": noise["sigma_start"], "sigma_end": noise["sigma_end"],
                         **{name: start.get(name, getattr(PPOConfig, name))
                            for name in ("spread_lr", "spread_head_lr", "spread_noise")}}
    return layout
