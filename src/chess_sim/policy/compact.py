"""The compact policy: a small image + state + instruction flow-matching policy that trains on two CPU cores.

Prefix (computed once per decision): per-camera conv encoders turn each image into 6 x 6 tokens; the state is
one token; the instruction, which follows the grammar "Move the <colour> <piece> from <square> to <square>.",
is four tokens (colour and piece embeddings; the from- and to-squares as Fourier features of their file and
rank, so that squares seen in few demonstrations share what neighbouring squares taught), and a policy for
captures ("Capture the <colour> <piece> on <square> with the <colour> <piece> from <square>.") reads the captured
piece as a fifth. The action expert is a transformer over the T = 50 noisy action tokens attending to the prefix
tokens. Each action token is also given the
flow time t and a task vector (state and instruction through an MLP, kept in the prefix as `task`): where to go is
said by the squares and the state, and handing them to every token directly spares the model finding that mapping
by attention among the image tokens.

Files: `config.json` (kind, architecture, normaliser) and `model.safetensors`; both written atomically.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from chess_sim import atomic
from chess_sim.config import CAMERAS, CompactConfig
from chess_sim.errors import first_line
from chess_sim.policy.base import Normalizer, standard_start
from chess_sim.sim.tasks import COLORS, PIECES, parse_instruction

KIND = "compact"


def tokenize_instruction(texts: list[str], captures: bool = False) -> torch.Tensor:
    """(B, 4) integer tokens (the mover's colour and piece, from-square, to-square), and with `captures` a fifth:
    the captured piece (0 for none, else 1 + its index in PIECES). ValueError names an instruction that does not
    follow the grammar (`sim.tasks.parse_instruction`), or a capture without `captures`."""
    rows = []
    for text in texts:
        colour, piece, source, target, captured = parse_instruction(text.strip())
        if captured is not None and not captures:
            raise ValueError(f"this policy reads no captures (train one with --tasks captures): {text.strip()!r}")
        row = [COLORS.index(colour), PIECES.index(piece), _square(source), _square(target)]
        rows.append(row + [0 if captured is None else 1 + PIECES.index(captured)] * captures)
    return torch.tensor(rows, dtype=torch.long)


def resize_images(images: torch.Tensor, size: int) -> torch.Tensor:
    """(B, 3, H, W) float in [0, 1] -> (B, 3, size, size), bilinear and antialiased; unchanged when already
    that size (training reads images cached at this size, see `frame_cache.py`)."""
    if images.shape[-2:] == (size, size):
        return images
    return F.interpolate(images, size=(size, size), mode="bilinear", antialias=True, align_corners=False)


def _square(name: str) -> int:
    return "abcdefgh".index(name[0]) + 8 * (int(name[1]) - 1)


SQUARE_FREQUENCIES = (1.0, 2.0, 4.0)
"""Fourier frequencies (half-periods per board side) of the square features: 4 is a period of two squares."""


def square_features(squares: torch.Tensor) -> torch.Tensor:
    """Square indices (B,) (a1 = 0, h8 = 63) -> (B, 2 + 4 * len(SQUARE_FREQUENCIES)) features: file and rank
    scaled to [-1, 1], and their sines and cosines."""
    coords = torch.stack([squares % 8, squares // 8], dim=1).float() / 3.5 - 1.0
    waves = [f(math.pi * frequency * coords) for frequency in SQUARE_FREQUENCIES for f in (torch.sin, torch.cos)]
    return torch.cat([coords, *waves], dim=1)


class _CameraEncoder(nn.Module):
    """(B, 3, S, S) in [0, 1] -> (B, (S/16)^2, width) tokens."""

    def __init__(self, width: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 5, stride=2, padding=2), nn.GELU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(64, width, 3, stride=2, padding=1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images).flatten(2).transpose(1, 2)


def _time_embedding(t: torch.Tensor, width: int) -> torch.Tensor:
    """Sinusoidal embedding of flow times t (B,) -> (B, width)."""
    half = width // 2
    frequencies = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device) / half)
    angles = t[:, None] * frequencies[None] * 100.0
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def _memory_keys_values(attention: nn.MultiheadAttention, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values (B, heads, P, width / heads) of prefix tokens (B, P, width), computed with the same operations
    and layouts as `F.multi_head_attention_forward` (so the attention's result is bit-identical to the module's)."""
    width, heads = attention.embed_dim, attention.num_heads
    sequence_first = memory.transpose(1, 0)
    length, batch = sequence_first.shape[:2]
    projected = F.linear(sequence_first, attention.in_proj_weight[width:], attention.in_proj_bias[width:])
    keys, values = projected.unflatten(-1, (2, width)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    return tuple(part.view(length, batch * heads, width // heads).transpose(0, 1)
                 .view(batch, heads, length, width // heads) for part in (keys, values))


def _cross_attention(attention: nn.MultiheadAttention, queries: torch.Tensor, keys: torch.Tensor,
                     values: torch.Tensor) -> torch.Tensor:
    """`attention(queries, memory, memory)` for batch-first queries (B, T, width), the memory's keys and values
    given by `_memory_keys_values`."""
    width, heads = attention.embed_dim, attention.num_heads
    sequence_first = queries.transpose(1, 0)
    length, batch = sequence_first.shape[:2]
    projected = F.linear(sequence_first, attention.in_proj_weight[:width], attention.in_proj_bias[:width])
    projected = projected.view(length, batch * heads, width // heads).transpose(0, 1)
    attended = F.scaled_dot_product_attention(projected.view(batch, heads, length, width // heads), keys, values)
    attended = attended.permute(2, 0, 1, 3).contiguous().view(batch * length, width)
    return F.linear(attended, attention.out_proj.weight, attention.out_proj.bias).view(length, batch, width) \
        .transpose(1, 0)


def _lowered_attention(attention: nn.MultiheadAttention, queries: torch.Tensor, keys: torch.Tensor | None = None,
                       values: torch.Tensor | None = None) -> torch.Tensor:
    """`attention(queries, memory, memory)` for batch-first queries (B, T, width) in a precision other than float32
    (a lowered chain, `policy/precision.py`), the memory's keys and values (B, heads, P, width / heads) given, or
    without them the queries' self-attention. Matrix products in that precision around a softmax in at least
    float32: on the CPU, PyTorch's attention kernels take longer in bfloat16 than in float32, this about half as
    long. The same attention as the module's, to the precision's rounding (not bit for bit)."""
    batch, length, width = queries.shape
    heads = attention.num_heads
    if keys is None:
        projected = F.linear(queries, attention.in_proj_weight, attention.in_proj_bias)
        queries, keys, values = projected.view(batch, length, 3, heads, width // heads).permute(2, 0, 3, 1, 4)
    else:
        queries = F.linear(queries, attention.in_proj_weight[:width], attention.in_proj_bias[:width]) \
            .view(batch, length, heads, width // heads).transpose(1, 2)
    scores = torch.matmul(queries, keys.transpose(-1, -2))
    weights = (scores.to(torch.promote_types(scores.dtype, torch.float32)) * (width // heads) ** -0.5).softmax(-1)
    attended = torch.matmul(weights.to(queries.dtype), values).transpose(1, 2).reshape(batch, length, width)
    return F.linear(attended, attention.out_proj.weight, attention.out_proj.bias)


class CompactPolicy(nn.Module):
    """FlowPolicy implementation (see `policy/base.py`)."""

    def __init__(self, config: CompactConfig | None = None, normalizer: Normalizer | None = None):
        super().__init__()
        self.config = config or CompactConfig()
        self.normalizer = normalizer or Normalizer.identity(self.config.action_dim)
        self.chunk, self.action_dim, self.steps = self.config.chunk, self.config.action_dim, self.config.steps
        self.time_power = self.config.time_power
        self.chain_dim = self.action_dim
        self.image_size = self.config.image_size
        width = self.config.width
        grid = (self.config.image_size // 16) ** 2
        self.cameras = nn.ModuleDict({name: _CameraEncoder(width) for name in CAMERAS})
        self.image_position = nn.Parameter(torch.randn(len(CAMERAS), grid, width) * 0.02)
        self.state_proj = nn.Linear(self.action_dim, width)
        self.colour = nn.Embedding(len(COLORS), width)
        self.piece = nn.Embedding(len(PIECES), width)
        self.square = nn.Sequential(nn.Linear(2 + 4 * len(SQUARE_FREQUENCIES), width), nn.GELU(),
                                    nn.Linear(width, width))
        self.square_role = nn.Parameter(torch.randn(2, width) * 0.02)
        if self.config.captures:
            self.captured = nn.Embedding(1 + len(PIECES), width)
        words = 4 + self.config.captures
        self.task_mlp = nn.Sequential(nn.Linear((1 + words) * width, width), nn.GELU(), nn.Linear(width, width))
        self.action_in = nn.Linear(self.action_dim, width)
        self.action_position = nn.Parameter(torch.randn(self.chunk, width) * 0.02)
        self.time_mlp = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width))
        layer = nn.TransformerDecoderLayer(width, self.config.heads, 4 * width, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.expert = nn.TransformerDecoder(layer, self.config.layers)
        self.action_out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, self.action_dim))

    # ------------------------------------------------------------------ FlowPolicy
    def encode(self, batch: dict) -> dict[str, torch.Tensor]:
        """Prefix {"tokens": (B, P, width), "task": (B, width)} with P = 2 * 36 image + 1 state + 4 instruction
        tokens (5 with `captures`); `task` is the MLP of the state and instruction tokens."""
        size = self.config.image_size
        tokens = []
        for i, name in enumerate(CAMERAS):
            images = batch[f"observation.images.{name}"].float()
            assert images.ndim == 4 and images.shape[1] == 3, f"{name} images must be (B, 3, H, W)"
            images = resize_images(images, size)
            tokens.append(self.cameras[name](images) + self.image_position[i])
        state = self.normalizer.normalize_state(batch["observation.state"].float())
        state_token = self.state_proj(state)
        tokens.append(state_token[:, None])
        words = tokenize_instruction(list(batch["task"]), bool(self.config.captures)).to(state.device)
        embedded = [self.colour(words[:, 0]), self.piece(words[:, 1]),
                    self.square(square_features(words[:, 2])) + self.square_role[0],
                    self.square(square_features(words[:, 3])) + self.square_role[1]]
        if self.config.captures:
            embedded.append(self.captured(words[:, 4]))
        text = torch.stack(embedded, dim=1)
        tokens.append(text)
        task = self.task_mlp(torch.cat([state_token, text.flatten(1)], dim=1))
        return {"tokens": torch.cat(tokens, dim=1), "task": task}

    def prepare_chain(self, prefix: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The prefix and, under "memory", each expert layer's cross-attention keys and values of its tokens, which
        every step of a chain shares: computed once per chain instead of at each of its K steps."""
        return {**prefix, "memory": [_memory_keys_values(layer.multihead_attn, prefix["tokens"])
                                     for layer in self.expert.layers]}

    def velocity(self, prefix: dict[str, torch.Tensor], x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        assert x_t.shape[1:] == (self.chunk, self.action_dim), f"x_t must be (B, T, A), got {tuple(x_t.shape)}"
        time = self.time_mlp(_time_embedding(t.to(x_t.device, torch.float32), self.config.width).to(x_t.dtype))
        hidden = self.action_in(x_t) + self.action_position + (time + prefix["task"])[:, None]
        if "memory" not in prefix:
            return self.action_out(self.expert(hidden, prefix["tokens"]))
        # nn.TransformerDecoderLayer's pre-norm forward (dropout is 0), with the memory's projections given: in
        # float32 with the module's own kernels, bit for bit; in another precision with faster ones
        exact = x_t.dtype == torch.float32
        for layer, (keys, values) in zip(self.expert.layers, prefix["memory"]):
            normed = layer.norm1(hidden)
            if exact:
                hidden = hidden + layer.self_attn(normed, normed, normed, need_weights=False)[0]
                hidden = hidden + _cross_attention(layer.multihead_attn, layer.norm2(hidden), keys, values)
            else:
                hidden = hidden + _lowered_attention(layer.self_attn, normed)
                hidden = hidden + _lowered_attention(layer.multihead_attn, layer.norm2(hidden), keys, values)
            hidden = hidden + layer.linear2(layer.activation(layer.linear1(layer.norm3(hidden))))
        return self.action_out(hidden)

    def features(self, prefix: dict[str, torch.Tensor]) -> torch.Tensor:
        return prefix["tokens"].mean(dim=1)

    def start_distribution(self, prefix: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return standard_start(prefix["tokens"].device)

    @property
    def action_steps(self) -> int:
        return self.config.action_steps or self.chunk

    def set_action_steps(self, steps: int) -> None:
        if steps < 1:
            raise ValueError(f"action_steps must be within 1..{self.chunk}, got {steps}")
        self.config = replace(self.config, action_steps=steps)

    def set_sampler(self, steps: int, time_power: int) -> None:
        self.config = replace(self.config, steps=steps, time_power=time_power)  # validates both
        self.steps, self.time_power = steps, time_power

    # ------------------------------------------------------------------ files
    def save(self, directory) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {"kind": KIND, "config": asdict(self.config), "normalizer": self.normalizer.to_dict()}
        atomic.write_text(directory / "config.json", json.dumps(config, indent=2))
        state = {name: tensor.detach().contiguous() for name, tensor in self.state_dict().items()}
        atomic.write_file(directory / "model.safetensors", lambda path: save_file(state, str(path)))

    @classmethod
    def load(cls, directory) -> "CompactPolicy":
        """The policy saved in `directory`, in eval mode; ValueError (one line, naming the file) when its files are
        missing, damaged or do not fit each other."""
        directory = Path(directory)
        config_path, weights_path = directory / "config.json", directory / "model.safetensors"
        if not config_path.is_file() or not weights_path.is_file():
            raise ValueError(f"{directory} is not a policy directory (needs config.json and model.safetensors)")
        try:
            data = json.loads(config_path.read_text())
            kind = data.get("kind")
        except (ValueError, AttributeError) as error:
            raise ValueError(f"{config_path} is not a policy config ({first_line(error)})") from None
        if kind != KIND:
            raise ValueError(f"{directory} holds a {kind!r} policy, not a compact one")
        try:
            architecture = dict(data["config"])
            if architecture.pop("steering", False):
                raise ValueError(f"{directory} holds a steered policy from before December 2026 (its start was part "
                                 f"of the compact policy); load it with that version of chess-sim")
            architecture.pop("start_spread", None)
            policy = cls(CompactConfig(**architecture), Normalizer.from_dict(data["normalizer"]))
        except Exception as error:  # noqa: BLE001 - any failure to read a user-given file is a bad input
            raise ValueError(f"{config_path} holds a damaged policy config: {first_line(error)}") from None
        try:
            policy.load_state_dict(load_file(str(weights_path)))
        except Exception as error:  # noqa: BLE001 - safetensors and torch each raise their own kinds
            raise ValueError(f"{weights_path} cannot be read as this policy's weights: {first_line(error)}") from None
        return policy.eval()

