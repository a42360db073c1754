"""The learned start around any FlowPolicy: it samples as before until trained, saves beside its policy and loads
back through `load_policy`; damaged or old-style files are one-line errors."""

import json
import math

import pytest
import torch

from chess_sim.config import START_SPREAD_BOUNDS, CompactConfig
from chess_sim.policy.base import Normalizer, sample_chain
from chess_sim.policy.compact import CompactPolicy
from chess_sim.policy.loading import load_policy
from chess_sim.policy.start import START_WEIGHTS, SteeredPolicy, with_spread

SMALL = CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=3)


def batch():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 32, 32, generator=generator)
    return {"observation.images.front": images, "observation.images.wrist": images.flip(0),
            "observation.state": torch.randn(2, 6, generator=generator),
            "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."]}


@pytest.fixture
def policy():
    torch.manual_seed(0)
    return CompactPolicy(SMALL, Normalizer.identity()).eval()


def test_the_spread_is_bounded_and_scales_the_draw(policy):
    wrapped = SteeredPolicy(policy)
    with torch.no_grad():
        wrapped.start.log_std.fill_(math.log(0.3))
        prefix = wrapped.encode(batch())
        draw = torch.randn(2, 50, 6)
        assert torch.allclose(sample_chain(wrapped, prefix, draw)[:, 0], 0.3 * draw)
        wrapped.start.log_std.fill_(math.log(100.0))
        assert float(wrapped.start.std()) == START_SPREAD_BOUNDS[1]


def test_a_hand_set_spread_samples_as_the_same_scale_of_the_draw_and_refuses_a_second_start(policy):
    tempered = with_spread(policy, 0.5)
    assert not tempered.training and float(tempered.start.std().detach()) == pytest.approx(0.5)
    with torch.no_grad():
        prefix = tempered.encode(batch())
        draw = torch.randn(2, 50, 6)
        assert torch.allclose(sample_chain(tempered, prefix, draw), sample_chain(policy, prefix, 0.5 * draw), atol=1e-6)
    with pytest.raises(ValueError, match="already has its own start"):
        with_spread(tempered, 0.5)
    with pytest.raises(ValueError, match="within"):
        with_spread(policy, 3.0)


def test_a_steered_policy_saves_and_loads_with_its_start(policy, tmp_path):
    wrapped = SteeredPolicy(policy)
    with torch.no_grad():
        wrapped.start.log_std.fill_(-0.5)
        wrapped.start.head[-1].weight.normal_(0.0, 0.05)
    wrapped.save(tmp_path)
    loaded = load_policy(tmp_path)
    assert isinstance(loaded, SteeredPolicy) and not loaded.training
    draw = torch.randn(2, 50, 6)
    with torch.no_grad():
        assert torch.equal(sample_chain(loaded, loaded.encode(batch()), draw),
                           sample_chain(wrapped, wrapped.encode(batch()), draw))
    assert isinstance(load_policy(_copy_base(policy, tmp_path / "plain")), CompactPolicy)


def _copy_base(policy, directory):
    policy.save(directory)
    return directory


def test_a_damaged_start_is_a_one_line_error(policy, tmp_path):
    SteeredPolicy(policy).save(tmp_path)
    (tmp_path / START_WEIGHTS).write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match="damaged start distribution") as error:
        load_policy(tmp_path)
    assert "\n" not in str(error.value)


def test_an_old_steered_compact_checkpoint_is_refused_in_one_line(policy, tmp_path):
    policy.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["config"].update(steering=True, start_spread="scene")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="steered policy from before December 2026"):
        load_policy(tmp_path)
