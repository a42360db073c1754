"""DAgger recording: a policy drives a scene, and from the states it visits the scripted expert takes over on a copy
of the simulation; each takeover is one demonstration episode. `Dagger` is the scene source that `data/record.py`
hands to its workers (`record(..., source=Dagger(...))`), so recording itself stays crash-safe and resumable and
never imports a policy.

Time convention: a takeover at the policy's decision d starts from the state the policy decided on (after d
executed chunks); its frame t holds the observation before the expert's command t, as every recorded episode does,
so frame 0 is exactly what the policy saw. The policy's own commands are never recorded: DAgger labels the states
a policy reaches with what the expert would do there. Takeovers from a state where a piece already toppled or a
neighbour was pushed are not made (no demonstration can undo them); takeovers the expert itself spoils, or gives
up on, are returned as failed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

import torch

from chess_sim.config import DaggerConfig, EvalConfig
from chess_sim.sim.judge import episode_row

RUNNING = "running"
"""End of a takeover that was still going when its `branch_steps` or the episode's time ran out (kept: a good
demonstration so far)."""
GAVE_UP = "gave_up"
"""End of a takeover in which the expert found no plan and held still: not a demonstration (counted as failed)."""


@dataclass(frozen=True)
class Dagger:
    """A DAgger recording: the policy directory that drives, and how (`config.DaggerConfig`). Sent to every
    recording worker, which calls `setup` once and `scene` per scene."""

    policy: str
    cfg: DaggerConfig
    kept_ends = ("success", RUNNING)
    """Takeovers with these ends are written; the others are counted as failed."""

    def settings(self) -> dict:
        """What a resumed recording must keep."""
        return {"dagger": {"policy": self.policy, **asdict(self.cfg)}}

    def setup(self):
        """In a worker: the driving policy, on one thread (one simulator and its policy per process and core). Always
        one, so that the recording does not depend on where it runs: a thread count changes a policy's last bits.
        (With one worker the worker is the calling process, which keeps the one thread.)"""
        from chess_sim.policy.loading import load_policy

        torch.set_num_threads(1)
        return load_policy(self.policy)

    def scene(self, env, expert, policy, seed: int, index: int) -> tuple[list, dict]:
        return dagger_scene(env, expert, policy, seed, index, self)

    def provenance(self) -> dict:
        return {"source": "dagger", "round": self.cfg.round, "policy": self.policy}

    @staticmethod
    def summary(driven: list[dict]) -> dict:
        """How the driving policy itself did on the scenes so far."""
        if not driven:
            return {}
        return {"policy_scenes": len(driven),
                "policy_success": sum(row["end"] == "success" for row in driven) / len(driven),
                "policy_ends": dict(Counter(row["end"] for row in driven))}


def dagger_scene(env, expert, policy, seed: int, index: int, dagger: Dagger):
    """Scene `(seed, index)` driven by `policy` with evaluation's decision (`eval.decide`: the deterministic chain
    from x_0 = `start_spread` times a standard-normal draw from the scene's `torch_seed`), with an expert takeover
    before every `branch_every`-th decision. Returns (takeover episodes in order, the policy's own episode row)."""
    from chess_sim.eval import decide

    observation, info = env.reset(seed=seed, options={"index": index})
    generator = torch.Generator().manual_seed(info["torch_seed"])
    protocol = EvalConfig(start_spread=dagger.cfg.start_spread)  # evaluation's noise-free decision, at the spread

    def policy_decision(observation, info):
        return env.step_chunk(decide(policy, [observation], [info["instruction"]], [generator], protocol)[0])

    return branched_episode(env, expert, index, dagger, policy_decision, observation, info)


def branched_episode(env, expert, index: int, dagger: Dagger, execute_decision, observation, info):
    """The reset episode of scene `index` driven decision by decision by `execute_decision(observation, info)`
    (which returns what `ChessEnv.step_chunk` returns), with an expert takeover before every `branch_every`-th
    decision. Returns (takeover episodes in order, the driven episode's row)."""
    cfg = dagger.cfg
    takeovers, decision, total = [], 0, 0.0
    while True:
        if decision % cfg.branch_every == 0 and env.judge.failure is None:
            provenance = {**dagger.provenance(), "decision": decision, "step": env.steps}
            takeovers.append(_takeover(env, expert, cfg.branch_steps, index, provenance))
        observation, reward, terminated, truncated, info = execute_decision(observation, info)
        total += reward
        decision += 1
        if terminated or truncated:
            break
    row = episode_row(info)
    row.update(decisions=decision, **{"return": total})
    return takeovers, row


def _takeover(env, expert, steps: int, index: int, provenance: dict):
    """The expert from the env's current state for up to `steps` steps, on a copy, recorded as an `Episode` of scene
    `index` whose row holds the takeover's end."""
    from chess_sim.data.record import EpisodeRecorder
    from chess_sim.sim.episodes import expert_steps

    recorder = EpisodeRecorder(env)
    with expert.on_a_copy():
        info, _, physics_s = expert_steps(env, expert, recorder.observe, recorder.keep, limit=steps)
        row = episode_row(info)
        gave_up = expert.expert.gave_up is not None
    if row["end"] in (None, "timeout"):  # cut short by its step budget or by the policy episode's time limit
        row["end"] = GAVE_UP if gave_up else RUNNING
    return recorder.episode(index, row, recovery=False, physics_s=physics_s, provenance=provenance)

