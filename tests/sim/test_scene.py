"""The scene as drawn: a finite, coarse floor and simplified meshes, with the same physics."""

from dataclasses import replace

import mujoco
import numpy as np
import pytest

from chess_sim.config import profile
from chess_sim.sim import assets
from chess_sim.sim import scene as scene_module
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.expert import ExpertDriver


@pytest.fixture(scope="module")
def envs():
    """(the infinite floor MuJoCo draws as 200 x 200 quads, the floor as built)."""
    patch = pytest.MonkeyPatch()
    patch.setattr(scene_module, "_draw_floor_coarsely", lambda model: None)
    infinite = ChessEnv(profile("baseline"))
    patch.undo()
    pair = (infinite, ChessEnv(profile("baseline")))
    yield pair
    for env in pair:
        env.close()


def test_the_floor_reaches_past_the_far_clip_with_the_extent_of_an_infinite_one(envs):
    infinite, built = envs
    floor = built.model.geom("floor").id
    size = built.model.geom_size[floor]
    assert infinite.model.geom_size[floor][0] == 0  # as compiled: infinite
    assert size[0] == size[1] > built.model.vis.map.zfar * built.model.stat.extent
    assert size[2] == scene_module.FLOOR_GRID_M / 2
    assert built.model.stat.extent == infinite.model.stat.extent  # the same clipping distances


def test_the_floor_changes_no_physics_and_observations_by_a_fraction_of_a_level(envs):
    infinite, built = envs
    experts = [ExpertDriver(env) for env in envs]
    for env in envs:
        env.reset(seed=5500001, options={"index": 9})
    for _ in range(4):
        old, new = infinite.observation_images(), built.observation_images()
        for name in old:
            assert np.abs(old[name].astype(int) - new[name]).mean() < 0.5, name
        for expert in experts:
            expert.chunk(50)
        np.testing.assert_array_equal(infinite.data.qpos, built.data.qpos)


def test_the_physics_does_not_depend_on_the_render_meshes(monkeypatch):
    """The arm links' collision hulls come from their own meshes (`COLLISION_CELL_M`), whatever the render meshes'
    detail."""
    physics = replace(profile("baseline"), render=False)
    coarse = ChessEnv(physics)
    render_mesh_dir = assets.render_mesh_dir
    monkeypatch.setattr(assets, "render_mesh_dir", lambda cell=0.002: render_mesh_dir(cell))
    fine = ChessEnv(physics)
    names = [coarse.model.mesh(coarse.model.geom_dataid[g]).name for g in range(coarse.model.ngeom)
             if coarse.model.geom_contype[g] == 2 and coarse.model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
    assert names and all(name.startswith("collision_") for name in names)
    assert coarse.model.nmeshface != fine.model.nmeshface  # the render meshes differ
    experts = [ExpertDriver(env) for env in (coarse, fine)]
    for env in (coarse, fine):
        env.reset(seed=5500001, options={"index": 4})
    for _ in range(6):  # up to 300 steps, or the episode's end (the expert solves this scene)
        results = [expert.chunk(50) for expert in experts]
        np.testing.assert_array_equal(coarse.data.qpos, fine.data.qpos)
        assert results[0][1:4] == results[1][1:4]  # the same reward, termination and truncation
        if results[0][2] or results[0][3]:
            break
    assert coarse.steps > 100
