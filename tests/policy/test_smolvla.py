"""The SmolVLA adapter on a tiny SmolVLA built offline: protocol, parity with LeRobot's own sampler, files,
bfloat16 prefixes, learning, bad directories."""

import copy
import json
import shutil

import pytest
import torch

from chess_sim.policy.base import FlowPolicy, Normalizer, chunk_actions, flow_matching_loss, sample_chunk
from chess_sim.policy.loading import load_policy
from chess_sim.policy.smolvla import SIDECAR, SmolVLAFlowPolicy
from chess_sim.policy.smolvla_build import build_tiny_smolvla
from chess_sim.threads import torch_threads

STATS = {"observation.state": {"mean": [0.0] * 5 + [50.0], "std": [30.0] * 5 + [20.0]},
         "action": {"mean": [1.0] * 6, "std": [20.0] * 5 + [0.0]}}
TASKS = ["Move the white knight from g1 to f3.", "Move the black pawn from e7 to e5.",
         "Move the white queen from d1 to h5."]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny model's matrices are a few dozen wide: a second thread only adds synchronisation."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return build_tiny_smolvla(tmp_path_factory.mktemp("tiny"), normalizer=Normalizer.from_stats(STATS)).eval()


def batch(size=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return {"observation.images.front": torch.rand(size, 3, 48, 64, generator=generator),
            "observation.images.wrist": torch.rand(size, 3, 48, 64, generator=generator),
            "observation.state": torch.randn(size, 6, generator=generator) * 30.0, "task": TASKS[:size]}


def noise(size=2, seed=1):
    return torch.randn(size, 50, 32, generator=torch.Generator().manual_seed(seed))


def part(data, i):
    return {key: value[i:i + 1] for key, value in data.items()}


@torch.no_grad()
def test_protocol_shapes_and_dtypes(policy):
    assert isinstance(policy, FlowPolicy)
    assert (policy.chunk, policy.action_dim, policy.chain_dim, policy.steps) == (50, 6, 32, 10)
    prefix = policy.encode(batch())
    assert prefix["keys"].shape == prefix["values"].shape == (2, 2, 2, 25, 16)
    assert prefix["pad_masks"].shape == (2, 25) and prefix["pad_masks"].dtype == torch.bool
    v = policy.velocity(prefix, noise(), torch.full((2,), 0.5))
    assert v.shape == (2, 50, 32) and v.dtype == torch.float32
    features = policy.features(prefix)
    assert features.shape == (2, 64) and features.dtype == torch.float32


@torch.no_grad()
def test_prefixes_split_and_stack(policy):
    whole = policy.encode(batch())
    parts = [policy.encode(part(batch(), i)) for i in range(2)]
    stacked = {key: torch.cat([p[key] for p in parts]) for key in whole}
    for key, value in whole.items():
        assert torch.allclose(value.float(), stacked[key].float(), atol=1e-5), key
    t = torch.full((2,), 0.7)
    assert torch.allclose(policy.velocity(whole, noise(), t), policy.velocity(stacked, noise(), t), atol=1e-5)


@torch.no_grad()
def test_velocity_leaves_the_prefix_untouched(policy):
    prefix = policy.encode(batch())
    before = {key: value.clone() for key, value in prefix.items()}
    first = policy.velocity(prefix, noise(), torch.full((2,), 1.0))
    second = policy.velocity(prefix, noise(), torch.full((2,), 1.0))
    assert torch.equal(first, second)
    assert all(torch.equal(prefix[key], before[key]) for key in prefix)


@torch.no_grad()
def test_sampler_matches_lerobots_own_within_1e5(policy):
    x0 = noise()
    ours = chunk_actions(policy, sample_chunk(policy, policy.encode(batch()), x0))
    inputs = policy.lerobot_inputs(batch())
    theirs = policy.lerobot.model.sample_actions(**inputs, noise=x0.clone())
    theirs = policy.normalizer.unnormalize_action(theirs[..., :6])
    assert ours.shape == (2, 50, 6)
    assert torch.allclose(ours, theirs, atol=1e-5, rtol=0)


def test_the_executed_actions_are_lerobots_n_action_steps_and_saved(policy, tmp_path):
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    policy.save(tmp_path / "open")
    closed = load_policy(tmp_path / "open")
    assert closed.action_steps == 50
    closed.set_action_steps(10)
    closed.save(tmp_path / "closed")
    assert load_policy(tmp_path / "closed").action_steps == 10
    assert SmolVLAPolicy.from_pretrained(tmp_path / "closed").config.n_action_steps == 10
    with pytest.raises(ValueError, match="within 1..50"):
        closed.set_action_steps(0)


def test_the_chains_steps_are_lerobots_num_steps_on_its_uniform_grid(policy, tmp_path):
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    policy.save(tmp_path / "ten")
    fewer = load_policy(tmp_path / "ten")
    fewer.set_sampler(4, 1)
    fewer.save(tmp_path / "four")
    assert load_policy(tmp_path / "four").steps == 4
    assert SmolVLAPolicy.from_pretrained(tmp_path / "four").config.num_steps == 4
    with pytest.raises(ValueError, match="uniform grid"):
        fewer.set_sampler(4, 2)


@torch.no_grad()
def test_save_load_round_trip_is_bit_exact_and_lerobot_reads_it(policy, tmp_path):
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    policy.save(tmp_path)
    loaded = load_policy(tmp_path)
    assert isinstance(loaded, SmolVLAFlowPolicy)
    mine, theirs = policy.state_dict(), loaded.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert loaded.normalizer.to_dict() == policy.normalizer.to_dict()
    x0 = noise()
    ours = sample_chunk(policy, policy.encode(batch()), x0)
    assert torch.equal(ours, sample_chunk(loaded, loaded.encode(batch()), x0))

    # A LeRobot user: from_pretrained + the saved processors (our normalisation) give our actions.
    lerobot = SmolVLAPolicy.from_pretrained(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(policy.lerobot.state_dict().values(), lerobot.state_dict().values()))
    preprocess, postprocess = make_pre_post_processors(lerobot.config, pretrained_path=str(tmp_path))
    actions = postprocess(lerobot.predict_action_chunk(preprocess(batch()), noise=x0.clone()))
    # LeRobot divides by std + 1e-8 where we divide by std: a relative difference of ~1e-7.
    assert torch.allclose(actions, chunk_actions(policy, ours), atol=1e-4, rtol=1e-5)


@torch.no_grad()
def test_a_bfloat16_prefix_gives_close_velocities(policy):
    prefix = policy.encode(batch())
    stored = {key: value.bfloat16() if value.is_floating_point() else value for key, value in prefix.items()}
    t = torch.full((2,), 0.4)
    exact, approx = policy.velocity(prefix, noise(), t), policy.velocity(stored, noise(), t)
    assert approx.dtype == torch.float32
    assert (approx - exact).abs().max() < 0.02 * exact.abs().max()


def test_imitation_steps_lower_the_loss_and_train_state_proj(policy):
    trainee = SmolVLAFlowPolicy(copy.deepcopy(policy.lerobot), policy.normalizer).train()
    assert not any(p.requires_grad for p in trainee.lerobot.model.vlm_with_expert.vlm.parameters())
    optimizer = torch.optim.AdamW([p for p in trainee.parameters() if p.requires_grad], lr=3e-3)
    data = batch(3, seed=5)
    actions = torch.randn(3, 50, 6, generator=torch.Generator().manual_seed(2)).cumsum(1) * 0.1  # normalised
    generator = torch.Generator().manual_seed(4)
    fixed_noise, fixed_t = torch.randn(3, 50, 32, generator=generator), torch.linspace(0.2, 0.9, 3)

    def held_out_loss():
        with torch.no_grad():
            return flow_matching_loss(trainee, trainee.encode(data), actions, fixed_noise, fixed_t).item()

    before = held_out_loss()
    for step in range(30):
        loss = flow_matching_loss(trainee, trainee.encode(data), actions, torch.randn(3, 50, 32, generator=generator),
                                  torch.rand(3, generator=generator))
        optimizer.zero_grad()
        loss.backward()
        if step == 0:  # the prefix is recomputed with gradients, so the state token's projection learns too
            assert trainee.lerobot.model.state_proj.weight.grad.abs().sum() > 0
        optimizer.step()
    assert held_out_loss() < 0.6 * before


def test_state_proj_gets_no_gradient_from_a_stored_prefix(policy):
    with torch.no_grad():
        prefix = policy.encode(batch())
    policy.zero_grad()
    policy.velocity(prefix, noise(), torch.full((2,), 0.5)).square().mean().backward()
    assert policy.lerobot.model.state_proj.weight.grad is None
    assert policy.lerobot.model.action_out_proj.weight.grad is not None
    policy.zero_grad()


def test_a_lerobot_checkpoint_without_our_normaliser_takes_the_dataset_stats(policy, tmp_path):
    """As with a downloaded lerobot/smolvla_base: other camera names, no chess-sim sidecar."""
    policy.save(tmp_path)
    (tmp_path / SIDECAR).unlink()
    config = json.loads((tmp_path / "config.json").read_text())
    images = {key: value for key, value in config["input_features"].items() if "images" in key}
    config["input_features"] = {**{f"observation.images.camera{i}": v for i, v in enumerate(images.values())},
                                "observation.state": config["input_features"]["observation.state"]}
    config["pad_language_to"] = "longest"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no chess_sim_policy.json"):
        SmolVLAFlowPolicy.load(tmp_path)
    loaded = SmolVLAFlowPolicy.load(tmp_path, stats=STATS)
    assert set(loaded.lerobot.config.image_features) == {"observation.images.front", "observation.images.wrist"}
    with torch.no_grad():
        x0 = noise()
        assert torch.equal(sample_chunk(loaded, loaded.encode(batch()), x0),
                           sample_chunk(policy, policy.encode(batch()), x0))


def test_bad_directories_give_one_line_value_errors(policy, tmp_path):
    policy.save(tmp_path / "good")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(tmp_path / "good", corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="damaged or unloadable SmolVLA") as error:
        load_policy(corrupt)
    assert "\n" not in str(error.value)
    (corrupt / "config.json").write_text(json.dumps({"type": "act"}))
    with pytest.raises(ValueError, match="'act' LeRobot policy"):
        SmolVLAFlowPolicy.load(corrupt)
    (corrupt / "config.json").unlink()
    with pytest.raises(ValueError, match="not a SmolVLA directory"):
        SmolVLAFlowPolicy.load(corrupt)


def test_training_smolvla_needs_an_init_checkpoint(tmp_path):
    from chess_sim.config import TrainConfig
    from chess_sim.imitation.bc import TrainError, train

    with pytest.raises(TrainError, match="needs --init"):
        train(tmp_path / "data", tmp_path / "out", TrainConfig(), policy_kind="smolvla")
