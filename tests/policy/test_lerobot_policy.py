"""Any LeRobot policy under chess-sim's evaluation: tiny ACT and diffusion policies built here (no weights fetched),
saved as `lerobot-train` saves them, loaded back with LeRobot's loaders."""

import json

import pytest
import torch

from chess_sim.policy.base import observation_batch
from chess_sim.policy.lerobot_policy import LeRobotPolicy, is_lerobot_policy
from chess_sim.policy.loading import load_evaluated


SIZE = 32
"""The tiny policies' camera side (conftest's LEROBOT_IMAGE_SIZE)."""


def diffusion_config(**overrides):
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

    fields = dict(device="cpu", n_obs_steps=1, horizon=8, n_action_steps=3, drop_n_last_frames=4,
                  down_dims=(16, 32), crop_shape=None, pretrained_backbone_weights=None, use_group_norm=True,
                  diffusion_step_embed_dim=16, num_inference_steps=3, spatial_softmax_num_keypoints=8)
    return DiffusionConfig(**{**fields, **overrides})


@pytest.fixture(scope="module")
def act_dir(tiny_act_dir, lerobot_policies):
    assert lerobot_policies[2] == SIZE
    return tiny_act_dir


@pytest.fixture(scope="module")
def diffusion_dir(tmp_path_factory, lerobot_policies):
    return lerobot_policies[1](diffusion_config(), tmp_path_factory.mktemp("diffusion"))


def observations(rows, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def image():
        return torch.randint(0, 256, (SIZE, SIZE, 3), generator=generator, dtype=torch.uint8).numpy()

    return [{"pixels": {"front": image(), "wrist": image()}, "agent_pos": (torch.randn(6, generator=generator) * 20).numpy()}
            for _ in range(rows)]


def batch_of(rows, seed=0):
    instructions = [f"Move the white pawn from e2 to e{3 + i % 2}." for i in range(rows)]
    return observation_batch(observations(rows, seed), instructions)


def generators(seeds):
    return [torch.Generator().manual_seed(seed) for seed in seeds]


def test_an_act_directory_is_evaluated_as_a_lerobot_policy(act_dir):
    policy = load_evaluated(act_dir)
    assert isinstance(policy, LeRobotPolicy) and is_lerobot_policy(act_dir)
    assert (policy.type, policy.action_steps, policy.image_size) == ("act", 4, SIZE)
    chunks = policy.act(batch_of(3), generators([0, 1, 2]))
    assert chunks.shape == (3, 4, 6) and chunks.dtype == "float32"


def test_act_decides_the_first_n_action_steps_of_its_chunk_in_so101_units(act_dir):
    policy = LeRobotPolicy.load(act_dir)
    batch = batch_of(4)
    normalized = policy.policy.predict_action_chunk(policy.preprocessor(dict(batch)))
    expected = normalized[:, :4] * 20.0  # the unnormaliser: mean 0, std 20
    assert torch.allclose(torch.from_numpy(policy.act(batch, generators(range(4)))), expected, atol=1e-4)


def test_a_decision_does_not_depend_on_the_rest_of_its_batch(act_dir, diffusion_dir):
    for directory in (act_dir, diffusion_dir):
        policy = LeRobotPolicy.load(directory)
        together = policy.act(batch_of(5), generators(range(5)))
        for i in (0, 4):
            row = {key: value[i:i + 1] for key, value in batch_of(5).items()}
            assert (policy.act(row, generators([i]))[0] == together[i]).all()


def test_diffusion_draws_from_the_episode_generator_and_leaves_torchs_own_alone(diffusion_dir):
    policy = LeRobotPolicy.load(diffusion_dir)
    assert policy.action_steps == 3 and policy.observation_history
    batch = batch_of(2)
    untouched = torch.manual_seed(123).get_state()
    same = policy.act(batch, generators([5, 6]))
    assert torch.equal(torch.get_rng_state(), untouched)
    assert (same == policy.act(batch, generators([5, 6]))).all()
    assert not (same == policy.act(batch, generators([7, 8]))).all()


@pytest.mark.parametrize("config, message", [
    (lambda act: diffusion_config(n_obs_steps=2, drop_n_last_frames=3), "n_obs_steps=2"),
    (lambda act: act(temporal_ensemble_coeff=0.01, n_action_steps=1), "temporal ensembling"),
])
def test_unsupported_policies_are_refused_in_one_line(config, message, tmp_path, lerobot_policies):
    act_config, save, _ = lerobot_policies
    directory = save(config(act_config), tmp_path / "policy")
    with pytest.raises(ValueError, match=message) as error:
        load_evaluated(directory)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("config, words", [({"type": "act", "chunk_size": "many"}, "cannot be read"),
                                           ({"type": "no_such_policy"}, "cannot be read")])
def test_a_damaged_lerobot_config_is_one_short_line(config, words, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=words) as error:
        load_evaluated(broken)
    assert "\n" not in str(error.value) and len(str(error.value)) < 400
    assert not is_lerobot_policy(tmp_path)


def test_damaged_weights_are_one_line(act_dir, tmp_path):
    import shutil

    shutil.copytree(act_dir, tmp_path / "act")
    (tmp_path / "act" / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(ValueError, match="cannot be loaded") as error:
        load_evaluated(tmp_path / "act")
    assert "\n" not in str(error.value)


def test_a_policy_for_other_cameras_or_joints_is_refused(act_dir, tmp_path):
    import shutil

    for name, change in (("cameras", lambda c: c["input_features"].update(
            {"observation.images.top": c["input_features"].pop("observation.images.front")})),
                         ("joints", lambda c: c["output_features"]["action"].update(shape=[7]))):
        shutil.copytree(act_dir, tmp_path / name)
        config = json.loads((tmp_path / name / "config.json").read_text())
        change(config)
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        with pytest.raises(ValueError, match="observation.images.top" if name == "cameras" else r"\(7,\)"):
            load_evaluated(tmp_path / name)


def test_a_smolvla_without_our_sidecar_runs_through_lerobots_own_processors(tmp_path):
    """As a SmolVLA fine-tuned by lerobot-train would come: LeRobot's processors hold its normalisation."""
    from chess_sim.policy.base import Normalizer
    from chess_sim.policy.smolvla import SIDECAR
    from chess_sim.policy.smolvla_build import build_tiny_smolvla

    stats = {"observation.state": {"mean": [0.0] * 6, "std": [30.0] * 6},
             "action": {"mean": [0.0] * 6, "std": [20.0] * 6}}
    build_tiny_smolvla(tmp_path / "vlm", normalizer=Normalizer.from_stats(stats)).save(tmp_path / "smolvla")
    (tmp_path / "smolvla" / SIDECAR).unlink()
    policy = load_evaluated(tmp_path / "smolvla")
    assert isinstance(policy, LeRobotPolicy) and (policy.type, policy.action_steps) == ("smolvla", 50)
    batch = batch_of(2)
    chunks = policy.act(batch, generators([1, 2]))
    assert chunks.shape == (2, 50, 6) and (chunks == policy.act(batch, generators([1, 2]))).all()
    assert not (chunks[0] == policy.act(batch, generators([3, 2]))[0]).all()  # the draw comes from the generator


def _with_step(act_dir, directory, step: dict):
    import shutil

    shutil.copytree(act_dir, directory)
    path = directory / "policy_preprocessor.json"
    pipeline = json.loads(path.read_text())
    pipeline["steps"].insert(0, step)
    path.write_text(json.dumps(pipeline))
    return directory


def test_a_checkpoint_whose_processor_names_foreign_code_runs_nothing_unless_trusted(act_dir, tmp_path, capsys):
    from chess_sim.cli import main

    marker = tmp_path / "ran"
    evil = _with_step(act_dir, tmp_path / "act", {"class": "os.system", "config": {"command": f"touch {marker}"}})
    with pytest.raises(ValueError, match="'os.system', code from outside LeRobot .* --trust-remote-code") as error:
        load_evaluated(evil)
    assert "\n" not in str(error.value) and not marker.exists()
    assert main(["eval", "--policy", str(evil), "--out", str(tmp_path / "eval"), "--episodes", "1"]) == 2
    error_line = capsys.readouterr().err
    assert error_line.count("\n") == 1 and "--trust-remote-code" in error_line and not marker.exists()
    with pytest.raises(ValueError):  # trusted, the step runs (and is no processor step)
        load_evaluated(evil, trust_remote_code=True)
    assert marker.exists()


def test_registered_steps_named_by_their_import_path_are_trusted(act_dir, tmp_path):
    from lerobot.processor import ProcessorStepRegistry

    from chess_sim.policy.lerobot_policy import check_processor_code

    registered = next(iter(ProcessorStepRegistry._registry.values()))
    trusted = _with_step(act_dir, tmp_path / "trusted",
                         {"class": f"{registered.__module__}.{registered.__qualname__}", "config": {}})
    check_processor_code(trusted)  # no refusal
    (trusted / "policy_postprocessor.json").write_text("[not a pipeline")
    with pytest.raises(ValueError, match="not a processor pipeline"):
        check_processor_code(trusted)
