"""SmolVLA through LeRobot: an adapter exposing LeRobot's `SmolVLAPolicy` (0.6.1) as a FlowPolicy.

LeRobot's code is imported and called, never copied or patched. `encode` runs what `VLAFlowMatching.
sample_actions` runs before its Euler loop (images via `prepare_images`, the normalised state via
`prepare_state`, the instruction tokenized as LeRobot's processor does, `embed_prefix`, then the VLM over the
prefix with `use_cache=True`) and returns the KV cache as plain tensors; `velocity` is one call of LeRobot's
`denoise_step` on a fresh `DynamicCache` rebuilt from them. Same time convention as `policy/base.py`.

Facts that shape the adapter:
- The chain runs over `max_action_dim` = 32 dimensions (the noise covers the padding); the first 6 are the
  joints (`chain_dim` = 32, `action_dim` = 6).
- The state is a token *inside* the prefix, so `state_proj` gets no gradient from a stored prefix; imitation
  training recomputes the prefix each step (encode with gradients), RL on stored prefixes leaves it as is.
- The instruction is padded to `tokenizer_max_length` ("max_length"), so every prefix of a policy has the same
  length L and stored prefixes stack.
- The denoise step appends to and crops the cache it is given, so stored prefixes are never handed to it.
- Only the action expert (and `state_proj`) train: LeRobot's `train_expert_only` freezes the VLM.

Prefix size per decision: keys + values 2 * layers * kv_heads * L * head_dim values. Real size (16 layers,
5 KV heads, head_dim 64, L = 2 * 64 image + 48 text + 1 state = 177): 1.81 M values, 3.5 MiB in bfloat16
(7.0 MiB in float32); the tiny test model (2 layers, 2 KV heads, head_dim 16, L = 2 * 4 + 16 + 1 = 25):
3.2 k values, 6.3 KiB in bfloat16. Stored prefixes may be kept in bfloat16 on the CPU: `velocity` moves and
casts them back to the model's device and dtype.

Files (`save`): LeRobot's `config.json` + `model.safetensors` (`SmolVLAPolicy.from_pretrained(dir)` loads
them), LeRobot's pre/post-processor files with our normalisation statistics, and `chess_sim_policy.json`
({"kind": "smolvla", "normalizer": ...}). The VLM's config and tokenizer are read from
`config.vlm_model_name` (a local directory, or a hub name already in the local cache) when loading.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

# Loading never reaches for the network: a hub-named VLM must already be in the local cache.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from chess_sim import atomic  # noqa: E402
from chess_sim.config import ACTION_DIM, CAMERAS, CHUNK  # noqa: E402
from chess_sim.errors import first_line  # noqa: E402
from chess_sim.policy.base import Normalizer, standard_start  # noqa: E402

KIND = "smolvla"
SIDECAR = "chess_sim_policy.json"
STATE, ACTION = "observation.state", "action"


def input_features(image_size: int) -> tuple[dict, dict]:
    """LeRobot `input_features`, `output_features` of a chess-sim SmolVLA: both cameras (3, S, S), the state
    (6,), the action (6,)."""
    from lerobot.configs import FeatureType, PolicyFeature

    inputs = {f"observation.images.{name}": PolicyFeature(FeatureType.VISUAL, (3, image_size, image_size))
              for name in CAMERAS}
    inputs[STATE] = PolicyFeature(FeatureType.STATE, (ACTION_DIM,))
    return inputs, {ACTION: PolicyFeature(FeatureType.ACTION, (ACTION_DIM,))}


def _adapt(config):
    """A copy of a SmolVLAConfig with chess-sim's features and fixed-length language padding (so that stored
    prefixes stack); the weights do not depend on either (state/action are padded to 32, images resized)."""
    if config.chunk_size != CHUNK:
        raise ValueError(f"SmolVLA chunk_size is {config.chunk_size}; chess-sim decisions are {CHUNK} steps")
    config = copy.deepcopy(config)
    config.input_features, config.output_features = input_features(config.resize_imgs_with_padding[0])
    config.pad_language_to = "max_length"
    if not 1 <= config.n_action_steps <= CHUNK:
        raise ValueError(f"SmolVLA n_action_steps is {config.n_action_steps}; it must be within 1..{CHUNK}")
    return config


class SmolVLAFlowPolicy(nn.Module):
    """FlowPolicy over a LeRobot `SmolVLAPolicy` (`.lerobot`); see the module docstring."""

    def __init__(self, lerobot, normalizer: Normalizer):
        super().__init__()
        self.lerobot = lerobot
        self.normalizer = normalizer
        config = lerobot.config
        self.chunk, self.action_dim = config.chunk_size, ACTION_DIM
        self.chain_dim, self.steps = config.max_action_dim, config.num_steps
        self.time_power = 1  # LeRobot's uniform grid, which its own `select_action` samples on
        self.image_size = None  # resized with padding inside, to a size above the frames'
        self.tokenizer = lerobot.model.vlm_with_expert.processor.tokenizer

    @classmethod
    def create(cls, config, normalizer: Normalizer) -> "SmolVLAFlowPolicy":
        """A new policy from a `SmolVLAConfig` (random expert; VLM weights as `config.load_vlm_weights` says)
        and the dataset's normaliser; the caller's config is not modified."""
        from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

        config = _adapt(config)
        return cls(SmolVLAPolicy(config).to(config.device), normalizer)

    # ------------------------------------------------------------------ FlowPolicy
    @property
    def action_steps(self) -> int:
        """LeRobot's `n_action_steps`, which its own `select_action` executes too."""
        return self.lerobot.config.n_action_steps

    def set_action_steps(self, steps: int) -> None:
        if not 1 <= steps <= self.chunk:
            raise ValueError(f"action_steps must be within 1..{self.chunk}, got {steps}")
        self.lerobot.config.n_action_steps = steps

    def set_sampler(self, steps: int, time_power: int) -> None:
        if steps < 1 or time_power != 1:
            raise ValueError(f"SmolVLA samples with K >= 1 steps on LeRobot's uniform grid (time power 1); got K = "
                             f"{steps}, power {time_power}")
        self.lerobot.config.num_steps = self.steps = steps

    @property
    def device(self) -> torch.device:
        return self.lerobot.model.action_out_proj.weight.device

    def lerobot_inputs(self, batch: dict) -> dict[str, object]:
        """Our batch -> the arguments of LeRobot's `VLAFlowMatching.sample_actions` / `embed_prefix`:
        images [(B, 3, S, S)] in [-1, 1], img_masks [(B,)], lang_tokens (B, Lt), lang_masks (B, Lt) bool,
        state (B, 32) normalised and zero-padded. The task gets LeRobot's trailing newline and is padded to
        `tokenizer_max_length` as `TokenizerProcessorStep` does."""
        tasks = batch.get("task")
        if isinstance(tasks, str) or not tasks or not all(isinstance(task, str) for task in tasks):
            raise ValueError("batch['task'] must be a list of instruction strings, one per sample")
        device, config = self.device, self.lerobot.config
        # Our cameras only: LeRobot fills a checkpoint's `empty_cameras` itself.
        observation = {key: batch[key].float().to(device) for key in (f"observation.images.{n}" for n in CAMERAS)}
        state = self.normalizer.normalize_state(batch[STATE].float().to(device))
        if len(tasks) != state.shape[0]:
            raise ValueError(f"{len(tasks)} tasks for a batch of {state.shape[0]} states")
        images, img_masks = self.lerobot.prepare_images(observation)
        tokens = self.tokenizer([task if task.endswith("\n") else f"{task}\n" for task in tasks],
                                max_length=config.tokenizer_max_length, truncation=True, padding="max_length",
                                padding_side="right", return_tensors="pt")
        return {"images": images, "img_masks": img_masks, "lang_tokens": tokens["input_ids"].to(device),
                "lang_masks": tokens["attention_mask"].to(device=device, dtype=torch.bool),
                "state": self.lerobot.prepare_state({STATE: state})}

    def encode(self, batch: dict) -> dict[str, torch.Tensor]:
        """Prefix {"keys", "values": (B, layers, kv_heads, L, head_dim) post-RoPE VLM K/V, "pad_masks": (B, L)
        bool, "pooled": (B, hidden) masked mean of the VLM's last hidden states over the prefix}."""
        from lerobot.policies.common.vla_utils import make_att_2d_masks

        model, inputs = self.lerobot.model, self.lerobot_inputs(batch)
        embeddings, pad_masks, att_masks = model.embed_prefix(
            inputs["images"], inputs["img_masks"], inputs["lang_tokens"], inputs["lang_masks"], state=inputs["state"])
        (hidden, _), cache = model.vlm_with_expert.forward(
            attention_mask=make_att_2d_masks(pad_masks, att_masks), position_ids=torch.cumsum(pad_masks, dim=1) - 1,
            past_key_values=None, inputs_embeds=[embeddings, None], use_cache=True)
        weight = pad_masks[:, :, None].to(hidden)
        pooled = (hidden * weight).sum(dim=1) / weight.sum(dim=1).clamp_min(1.0)
        return {"keys": torch.stack([layer.keys for layer in cache.layers], dim=1),
                "values": torch.stack([layer.values for layer in cache.layers], dim=1),
                "pad_masks": pad_masks, "pooled": pooled.float()}

    def velocity(self, prefix: dict[str, torch.Tensor], x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """v(x_t, t): x_t (B, T, 32) normalised, t (B,) -> (B, T, 32) float32; `prefix` is left untouched."""
        from transformers import DynamicCache

        assert x_t.shape[1:] == (self.chunk, self.chain_dim), f"x_t must be (B, T, C), got {tuple(x_t.shape)}"
        dtype = self.lerobot.model.vlm_with_expert.get_vlm_model().text_model.dtype
        keys = prefix["keys"].to(device=x_t.device, dtype=dtype)
        values = prefix["values"].to(device=x_t.device, dtype=dtype)
        # A fresh cache per call: the denoise step appends the suffix to it and crops it back.
        cache = DynamicCache(ddp_cache_data=[(keys[:, i], values[:, i]) for i in range(keys.shape[1])])
        return self.lerobot.model.denoise_step(prefix_pad_masks=prefix["pad_masks"].to(x_t.device),
                                               past_key_values=cache, x_t=x_t, timestep=t.to(x_t))

    def prepare_chain(self, prefix: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The prefix as it is: it already holds the VLM's keys and values, which every step attends to."""
        return prefix

    def features(self, prefix: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, hidden) float32: the prefix's pooled VLM features (computed in `encode`)."""
        return prefix["pooled"].float()

    def start_distribution(self, prefix: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return standard_start(prefix["pooled"].device)

    # ------------------------------------------------------------------ files
    def save(self, directory) -> None:
        """LeRobot's files + LeRobot processors with our statistics + the sidecar. Everything is written to a
        staging folder first and renamed in file by file, the sidecar last."""
        from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        staging = directory / ".smolvla.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        self.lerobot.save_pretrained(staging)
        preprocessor, postprocessor = make_smolvla_pre_post_processors(self.lerobot.config, self.lerobot_stats())
        preprocessor.save_pretrained(staging)
        postprocessor.save_pretrained(staging)
        for path in sorted(staging.iterdir()):
            os.replace(path, directory / path.name)
        staging.rmdir()
        atomic.write_text(directory / SIDECAR, json.dumps({"kind": KIND, "normalizer": self.normalizer.to_dict()},
                                                         indent=2))

    def lerobot_stats(self) -> dict[str, dict[str, torch.Tensor]]:
        """Our normaliser as LeRobot dataset statistics (std already floored at `Normalizer.MIN_STD`)."""
        n = self.normalizer
        return {STATE: {"mean": n.state_mean, "std": n.state_std}, ACTION: {"mean": n.action_mean, "std": n.action_std}}

    @classmethod
    def load(cls, directory, stats: dict | None = None, device: str | None = None) -> "SmolVLAFlowPolicy":
        """A LeRobot SmolVLA directory (ours, or e.g. a downloaded `lerobot/smolvla_base`), in eval mode. The
        normaliser comes from our sidecar, else from `stats` (LeRobot dataset statistics); ValueError (one
        line) for a directory that is not a loadable SmolVLA checkpoint."""
        from lerobot.configs import PreTrainedConfig
        from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

        directory = Path(directory)
        config_path, weights_path = directory / "config.json", directory / "model.safetensors"
        if not config_path.is_file() or not weights_path.is_file():
            raise ValueError(f"{directory} is not a SmolVLA directory (needs config.json and model.safetensors)")
        try:
            kind = json.loads(config_path.read_text()).get("type")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as error:
            raise ValueError(f"{config_path} is not a valid LeRobot config ({error})") from None
        if kind != KIND:
            raise ValueError(f"{directory} holds a {kind!r} LeRobot policy, not a SmolVLA one")
        sidecar = directory / SIDECAR
        if sidecar.is_file():
            normalizer = Normalizer.from_dict(json.loads(sidecar.read_text())["normalizer"])
        elif stats is not None:
            normalizer = Normalizer.from_stats(stats)
        else:
            raise ValueError(f"{directory} has no {SIDECAR}: pass the dataset statistics to normalise with")
        try:
            config = PreTrainedConfig.from_pretrained(directory, local_files_only=True)
            if device is not None:
                config.device = device
            config = _adapt(config)
            policy = SmolVLAPolicy.from_pretrained(directory, config=config, local_files_only=True, strict=True)
        except Exception as error:  # draccus, safetensors, transformers and torch each raise their own kinds
            raise ValueError(f"{directory} holds a damaged or unloadable SmolVLA: {first_line(error)}") from None
        return cls(policy, normalizer).eval()
