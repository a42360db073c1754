"""SmolVLA policies built offline, with random weights: a tiny one for tests and a real-sized one for benchmarks.

Both write a local VLM directory (a `SmolVLMConfig`, a word-level tokenizer over the instruction grammar built
with `tokenizers`, a `SmolVLMProcessor`) and point `SmolVLAConfig.vlm_model_name` at it with
`load_vlm_weights=False`, so no hub access is needed. The VLM directory must stay where it was written: saved
policies name it, as LeRobot's checkpoints name their hub VLM.
"""

from __future__ import annotations

from pathlib import Path

import torch

from chess_sim.policy.base import Normalizer
from chess_sim.sim.tasks import COLORS, PIECES
from chess_sim.policy.smolvla import SmolVLAFlowPolicy, input_features

SPECIAL_TOKENS = {"pad_token": "<pad>", "unk_token": "<unk>"}
IMAGE_TOKENS = {"fake_image_token": "<fake_token_around_image>", "global_image_token": "<global-img>",
                "image_token": "<image>", "end_of_utterance_token": "<end_of_utterance>"}
SQUARES = [f"{file}{rank}" for file in "abcdefgh" for rank in range(1, 9)]
WORDS = ["Move", "the", "from", "to", ".", "\n", *COLORS, *PIECES, *SQUARES]


def _tokenizer():
    """PreTrainedTokenizerFast over the instruction vocabulary; spaces separate words, '.' and newline are
    tokens of their own; anything else is <unk>."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = [*SPECIAL_TOKENS.values(), *IMAGE_TOKENS.values(), *WORDS]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(vocabulary)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="removed"), pre_tokenizers.Split(Regex(r"[^\w ]"), behavior="isolated")])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **SPECIAL_TOKENS, extra_special_tokens=IMAGE_TOKENS)


def write_vlm(directory, vision: dict, text: dict, scale_factor: int) -> Path:
    """A local VLM directory: SmolVLMConfig (vision/text keyword arguments) + tokenizer + processor."""
    from transformers import SmolVLMConfig, SmolVLMImageProcessor, SmolVLMProcessor, SmolVLMVideoProcessor

    directory = Path(directory).resolve()
    tokenizer = _tokenizer()
    pad, image = tokenizer.pad_token_id, tokenizer.convert_tokens_to_ids(IMAGE_TOKENS["image_token"])
    text = {"model_type": "llama", "pad_token_id": pad, **text,
            "vocab_size": max(len(tokenizer), text.get("vocab_size", 0))}
    config = SmolVLMConfig(vision_config=vision, text_config=text, scale_factor=scale_factor,
                           image_token_id=image, pad_token_id=pad)
    tokens_per_image = (vision["image_size"] // vision["patch_size"]) ** 2 // scale_factor ** 2
    processor = SmolVLMProcessor(image_processor=SmolVLMImageProcessor(), tokenizer=tokenizer,
                                 video_processor=SmolVLMVideoProcessor(), image_seq_len=tokens_per_image)
    config.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def smolvla_config(vlm_dir, image_size: int, tokenizer_max_length: int = 48, device: str = "cpu", **overrides):
    """A SmolVLAConfig for chess-sim's features over the VLM in `vlm_dir` (random init, no hub)."""
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig

    inputs, outputs = input_features(image_size)
    return SmolVLAConfig(vlm_model_name=str(vlm_dir), load_vlm_weights=False, input_features=inputs,
                         output_features=outputs, chunk_size=50, n_action_steps=50,
                         resize_imgs_with_padding=(image_size, image_size), tokenizer_max_length=tokenizer_max_length,
                         pad_language_to="max_length", device=device, **overrides)


def build_tiny_smolvla(directory, seed: int = 0, normalizer: Normalizer | None = None,
                       device: str = "cpu") -> SmolVLAFlowPolicy:
    """~0.4 M parameters: vision 1 layer x 64 wide on 64 px images (patch 16, pixel shuffle 2 -> 4 tokens per
    camera), text 2 layers x 64 wide, expert 48 wide, 16 language tokens: prefix length 25. VLM files in
    `directory/vlm`."""
    vlm = write_vlm(Path(directory) / "vlm",
                    vision={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
                            "num_attention_heads": 2, "image_size": 64, "patch_size": 16},
                    text={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                          "max_position_embeddings": 256},
                    scale_factor=2)
    torch.manual_seed(seed)
    return SmolVLAFlowPolicy.create(smolvla_config(vlm, 64, tokenizer_max_length=16, device=device),
                                    normalizer or Normalizer.identity())


def real_smolvla_config(vlm_dir, device: str = "cpu"):
    """SmolVLA's default shape over a SmolVLM2-500M-sized VLM in `vlm_dir` (written by `build_real_smolvla`):
    512 px images (64 tokens per camera), the first 16 of 32 text layers, expert 0.75 x 960 wide."""
    return smolvla_config(vlm_dir, 512, tokenizer_max_length=48, device=device, num_vlm_layers=16)


def build_real_smolvla(directory, device: str = "cpu", seed: int = 0,
                       normalizer: Normalizer | None = None) -> SmolVLAFlowPolicy:
    """SmolVLM2-500M-sized SmolVLA with random weights (~450 M parameters: vision 86 M, text 205 M, expert
    98 M), built offline for speed measurements."""
    vlm = write_vlm(Path(directory) / "vlm",
                    vision={"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                            "num_attention_heads": 12, "image_size": 512, "patch_size": 16},
                    text={"hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 32,
                          "num_attention_heads": 15, "num_key_value_heads": 5, "head_dim": 64,
                          "vocab_size": 49280, "rope_theta": 100000.0, "max_position_embeddings": 8192,
                          "rms_norm_eps": 1e-5},
                    scale_factor=4)
    torch.manual_seed(seed)
    return SmolVLAFlowPolicy.create(real_smolvla_config(vlm, device), normalizer or Normalizer.identity())
