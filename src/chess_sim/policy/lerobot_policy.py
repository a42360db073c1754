"""Any LeRobot policy directory (ACT, diffusion, pi0, SmolVLA, ...: `config.json` with LeRobot's `"type"`) as
`chess-sim eval` drives it, loaded and run with LeRobot's own loaders and processors, never patched.

A decision is one call of the policy's `predict_action_chunk` on LeRobot's preprocessed batch (the dataset's
feature names, `observation.images.*` (B, 3, H, W) in [0, 1], `observation.state` (B, 6), `task`), then LeRobot's
postprocessor; the episode executes the first `n_action_steps` actions, as LeRobot's `select_action` would, and
decides again. A decision runs with torch's global generator seeded from the episode's own generator (and put
back afterwards): whatever a policy draws (SmolVLA's and pi0's start noise, diffusion's DDPM steps) is then a
function of the scene and the decision, and two policies evaluated on the same scenes draw from the same
streams. Each row of a batch is decided on its own (a batch of one): LeRobot's models do not compute a row
bit-identically in batches of other sizes (a tiny ACT's first row alone and in a batch of 5 differed in the last
bits, below 1e-4, on this project's 2-core CPU), and one at a time an episode's outcome depends on nothing else in
the batch, so it does not depend on `--envs` either.

Checkpoints from elsewhere run no code of theirs: a processor step that names its class by import path (LeRobot
would import and call it) is refused unless the class is one of LeRobot's registered steps or ours, or the caller
trusts the checkpoint's code (`trust_remote_code`, `--trust-remote-code`). Steps named by `registry_name` are
looked up among the steps already registered and import nothing.

Not supported, refused with a one-line error: observation histories (`n_obs_steps` > 1: the simulator returns the
observation at decisions only) and ACT's temporal ensembling (it needs a decision at every step).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from chess_sim.config import CAMERAS
from chess_sim.errors import first_line

TIME_DIMENSION = {"diffusion"}
"""Policy types whose `predict_action_chunk`, called without their observation queues, reads every observation as
(B, n_obs_steps, ...) (SmolVLA, pi0 and ACT read (B, ...); a SmolVLA given the time dimension fails)."""


class LeRobotPolicy:
    """A LeRobot `PreTrainedPolicy` with its pre- and post-processors (see the module docstring)."""

    def __init__(self, policy, preprocessor, postprocessor):
        self.policy, self.preprocessor, self.postprocessor = policy, preprocessor, postprocessor
        config = policy.config
        self.type = config.type
        self.image_size = _image_size(config)
        """Side of the square images the policy was trained on (its input features), which evaluation's
        simulators deliver (`base.observed_env`); None when its cameras differ in size or are not square."""
        self.action_steps = int(config.n_action_steps)
        """Actions executed per decision."""
        self.observation_history = config.type in TIME_DIMENSION
        """Whether the model takes observations with a time dimension, (B, n_obs_steps, ...)."""

    @classmethod
    def load(cls, directory, device: str = "cpu", trust_remote_code: bool = False) -> "LeRobotPolicy":
        """The policy saved in `directory` (a `pretrained_model` folder of `lerobot-train`, or any
        `save_pretrained` output with its processors), in eval mode on `device`; ValueError (one line) when it
        cannot be loaded or run here."""
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        directory = Path(directory)
        if not trust_remote_code:
            check_processor_code(directory)
        try:
            config = PreTrainedConfig.from_pretrained(directory, local_files_only=True)
        except Exception as error:  # noqa: BLE001 - draccus, json and the type registry each raise their own
            raise ValueError(f"{directory} holds a LeRobot policy config that cannot be read: {first_line(error)}") from None
        config.device = device
        _check_supported(config, directory)
        try:
            policy = get_policy_class(config.type).from_pretrained(directory, config=config, local_files_only=True)
            preprocessor, postprocessor = make_pre_post_processors(
                config, pretrained_path=str(directory),
                preprocessor_overrides={"device_processor": {"device": device}},
                postprocessor_overrides={"device_processor": {"device": "cpu"}})
        except Exception as error:  # noqa: BLE001 - safetensors, transformers and torch each raise their own
            raise ValueError(f"{directory} holds a LeRobot policy that cannot be loaded: {first_line(error)}") from None
        policy.eval()
        return cls(policy, preprocessor, postprocessor)

    @torch.no_grad()
    def act(self, batch: dict, generators: list[torch.Generator]) -> np.ndarray:
        """Chunks (B, n_action_steps, 6) in SO-101 units for a chess-sim observation batch of B rows
        (`base.observation_batch`), one generator per row (the episode's) to seed what the policy draws."""
        rows = len(batch["task"])
        assert len(generators) == rows, f"{len(generators)} generators for {rows} observations"
        return np.stack([self._decide_one({key: value[i:i + 1] for key, value in batch.items()}, generators[i])
                         for i in range(rows)])

    def _decide_one(self, row: dict, generator: torch.Generator) -> np.ndarray:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.policy.reset()  # LeRobot policies queue actions and observations; each decision starts afresh
            # contiguous (B, C, H, W), as lerobot-eval hands them over: a permuted (channels-last) image takes other
            # convolution kernels, and their last bits differ
            inputs = self.preprocessor({key: value.contiguous() if torch.is_tensor(value) else value
                                        for key, value in row.items()})
            if self.observation_history:
                inputs = {key: value.unsqueeze(1) if key.startswith("observation.") and torch.is_tensor(value)
                          else value for key, value in inputs.items()}
            actions = self.postprocessor(self.policy.predict_action_chunk(inputs)[:, :self.action_steps])
        assert actions.shape[1:] == (self.action_steps, 6), f"expected (1, T, 6) actions, got {tuple(actions.shape)}"
        return actions[0].float().cpu().numpy()


def is_lerobot_policy(directory) -> bool:
    """Whether `directory` holds a LeRobot policy config (`config.json` naming a `"type"`)."""
    try:
        data = json.loads((Path(directory) / "config.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and isinstance(data.get("type"), str)


PROCESSOR_FILES = ("policy_preprocessor.json", "policy_postprocessor.json")
"""The pipeline files LeRobot's `make_pre_post_processors` reads from a policy directory."""
TRUSTED_PACKAGES = ("lerobot.", "chess_sim.")
"""Packages whose processor steps a checkpoint may name by import path (installed code, not the checkpoint's)."""


def check_processor_code(directory: Path) -> None:
    """ValueError (one line) when a pipeline file of `directory` names a processor step by an import path outside
    LeRobot's registered steps and ours: loading it would import and call code the checkpoint chose. Nothing of the
    checkpoint is imported to decide."""
    from lerobot.processor import ProcessorStepRegistry

    registered = set(ProcessorStepRegistry._registry.values())
    for name in PROCESSOR_FILES:
        path = Path(directory) / name
        if not path.is_file():
            continue
        try:
            steps = json.loads(path.read_text()).get("steps", [])
            entries = [(step.get("registry_name"), step.get("class")) for step in steps]
        except (OSError, ValueError, AttributeError, TypeError) as error:
            raise ValueError(f"{path} is not a processor pipeline LeRobot can read ({first_line(error)})") from None
        for registry_name, class_path in entries:
            if registry_name is None and not _trusted_step(class_path, registered):
                raise ValueError(f"{path} names the processor step {class_path!r}, code from outside LeRobot that "
                                 f"loading would run; pass --trust-remote-code if you trust the checkpoint's author")


def _trusted_step(class_path, registered: set) -> bool:
    """Whether `class_path` ("module.Name") is a registered processor step of an installed trusted package."""
    import importlib

    if not isinstance(class_path, str) or "." not in class_path or not class_path.startswith(TRUSTED_PACKAGES):
        return False
    module, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None) in registered
    except ImportError:
        return False


def _check_supported(config, directory: Path) -> None:
    ours = {f"observation.images.{name}" for name in CAMERAS}
    images = set(config.image_features)
    if not images or not images <= ours:
        raise ValueError(f"{directory}: the policy reads the cameras {sorted(images)}; chess-sim has "
                         f"{sorted(ours)} (train it on a chess-sim dataset, or use lerobot-eval's --rename_map)")
    state, action = config.robot_state_feature, config.action_feature
    if state is None or tuple(state.shape) != (6,) or action is None or tuple(action.shape) != (6,):
        raise ValueError(f"{directory}: the policy's state and action must be the SO-101's 6 joints, got "
                         f"{None if state is None else tuple(state.shape)} and "
                         f"{None if action is None else tuple(action.shape)}")
    if getattr(config, "n_obs_steps", 1) != 1:
        raise ValueError(f"{directory}: {config.type} with n_obs_steps={config.n_obs_steps} needs an observation "
                         "history; chess-sim eval supports n_obs_steps=1 (use lerobot-eval --env.type=chess_sim)")
    if getattr(config, "temporal_ensemble_coeff", None) is not None:
        raise ValueError(f"{directory}: ACT's temporal ensembling decides at every step; chess-sim eval executes "
                         "chunks (use lerobot-eval --env.type=chess_sim)")


def _image_size(config) -> int | None:
    sizes = {tuple(feature.shape[-2:]) for feature in config.image_features.values()}
    if len(sizes) != 1:
        return None
    height, width = sizes.pop()
    return height if height == width else None
