"""The view culling: hand-placed spheres against a known frustum, and camera images unchanged by it."""

import contextlib

import mujoco
import numpy as np
import pytest

from chess_sim.config import profile
from chess_sim.sim import env as env_module
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.expert import ExpertDriver
from chess_sim.sim.frustum import MARGIN_M, UNDRAWN_GROUP, cullable, culled, outside_view

# A camera at the origin looking down -z (MuJoCo's camera frame equals the world's), 90 degrees vertical field:
# the side planes are y = +-|z| and, at aspect 2, x = +-2|z|.
SPHERES = {
    "ahead": (0.0, 0.0, -1.0, 0.1),
    "past_the_top": (0.0, 1.5, -1.0, 0.1),
    "touching_the_top": (0.0, 1.148, -1.0, 0.1),  # centre 0.1047 past the plane: kept by the margin alone
    "inside_only_at_aspect_2": (1.5, 0.0, -1.0, 0.1),
    "behind": (0.0, 0.0, 1.0, 0.1),
}
XML = """<mujoco><worldbody><camera name="eye" pos="0 0 0" fovy="90"/>
<geom name="floor" type="plane" size="0 0 1" pos="0 5 0" zaxis="0 -1 0"/>{}</worldbody></mujoco>""".format(
    "".join(f'<geom name="{name}" type="sphere" size="{r}" pos="{x} {y} {z}"/>'
            for name, (x, y, z, r) in SPHERES.items()))


@pytest.fixture(scope="module")
def scene():
    model = mujoco.MjModel.from_xml_string(XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def culled_names(model, data, aspect):
    hidden = outside_view(model, data, model.camera("eye").id, aspect)
    return {model.geom(i).name for i in np.flatnonzero(hidden)}


def test_spheres_wholly_beyond_a_side_plane_are_culled(scene):
    model, data = scene
    assert culled_names(model, data, aspect=1.0) == {"past_the_top", "inside_only_at_aspect_2", "behind"}
    assert culled_names(model, data, aspect=2.0) == {"past_the_top", "behind"}


def test_the_margin_keeps_a_sphere_grazing_the_edge(scene):
    model, data = scene
    # distance of the sphere's centre past the top plane y = -z: (y + z) / sqrt(2), beyond the radius alone
    assert 0.1 < (1.148 - 1.0) / np.sqrt(2) < 0.1 + MARGIN_M
    assert "touching_the_top" not in culled_names(model, data, aspect=1.0)


@pytest.mark.parametrize("change", ["shadows", "reflections", "orthographic"])
def test_nothing_is_culled_where_unseen_geoms_can_show(change):
    model = mujoco.MjModel.from_xml_string(XML.replace("<worldbody>", '<asset><material name="m"/></asset><worldbody>'
                                                       '<light pos="0 0 1" castshadow="false"/>'))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    camera = model.camera("eye").id
    assert cullable(model, camera)
    if change == "shadows":
        model.light_castshadow[0] = True
    elif change == "reflections":
        model.mat_reflectance[0] = 0.5
    else:
        model.cam_projection[camera] = mujoco.mjtProjection.mjPROJ_ORTHOGRAPHIC
    assert not cullable(model, camera)
    before = model.geom_group.copy()
    with culled(model, data, camera, aspect=1.0):
        np.testing.assert_array_equal(model.geom_group, before)


def test_planes_are_never_culled(scene):
    model, data = scene
    assert model.geom_rbound[model.geom("floor").id] == 0
    assert "floor" not in culled_names(model, data, aspect=1.0)


def test_groups_come_back_after_the_block_even_on_error(scene):
    model, data = scene
    before = model.geom_group.copy()
    with pytest.raises(RuntimeError), culled(model, data, model.camera("eye").id, aspect=1.0):
        assert model.geom_group[model.geom("behind").id] == UNDRAWN_GROUP
        raise RuntimeError
    np.testing.assert_array_equal(model.geom_group, before)


def test_camera_images_are_pixel_identical_with_and_without_culling(monkeypatch):
    env = ChessEnv(profile("baseline"))
    env.reset(seed=5500001, options={"index": 3})
    expert = ExpertDriver(env)
    for _ in range(3):
        assert cullable(env.model, env.scene.cameras["wrist"])
        drawn = env.model.geom_group <= 2
        assert outside_view(env.model, env.data, env.scene.cameras["wrist"], 1.0)[drawn].any()  # something to cull
        culled_images = env.camera_images()
        with monkeypatch.context() as patch:
            patch.setattr(env_module, "culled", lambda *args, **kwargs: contextlib.nullcontext())
            assert env.camera_images().keys() == culled_images.keys()
            for name, image in env.camera_images().items():
                np.testing.assert_array_equal(image, culled_images[name], err_msg=name)
        expert.chunk(30)
    env.close()
