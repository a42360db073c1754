"""Which geoms a camera cannot see, so that they are left out of its image's draw calls.

llvmpipe transforms and lights every vertex it is handed, including those of geoms wholly outside the view (the
wrist camera sees a corner of the board: ~20 of the scene's 54 drawn geoms lie outside it). A geom whose bounding
sphere lies wholly beyond one of the frustum's four side planes draws no pixel, so leaving it out gives the same
image (checked pixel for pixel in `tests/sim/test_frustum.py`). Planes (bounding radius 0: infinite) are always
drawn; so is anything in front of the near plane or past the far one, which the side planes alone do not cull.
A geom outside the view can still show in it through a shadow or a reflection, and the frustum here is that of a
perspective camera given by its vertical field: with shadows or reflective materials in the model, or for an
orthographic camera or one given by its sensor, nothing is culled.
"""

from __future__ import annotations

import contextlib

import mujoco
import numpy as np

UNDRAWN_GROUP = 5
"""A geom group no renderer here draws (MuJoCo's default options draw groups 0-2)."""
MARGIN_M = 0.01
"""Added to every bounding radius, so that rounding never culls a geom that touches the view's edge."""


def outside_view(model: mujoco.MjModel, data: mujoco.MjData, camera: int, aspect: float) -> np.ndarray:
    """(ngeom,) bool: the geoms wholly outside fixed camera `camera`'s view (vertical field `cam_fovy`, images of
    width / height = `aspect`), from their bounding spheres (`geom_xpos`, `geom_rbound`) in `data`'s current
    pose."""
    rotation = data.cam_xmat[camera].reshape(3, 3)
    # camera frame: x right, y up, the view along -z
    centres = (data.geom_xpos - data.cam_xpos[camera]) @ rotation
    half_height = np.tan(np.deg2rad(model.cam_fovy[camera]) / 2)
    radius = model.geom_rbound + MARGIN_M
    beyond = np.zeros(model.ngeom, dtype=bool)
    for axis, half in ((1, half_height), (0, half_height * aspect)):
        # outward unit normals (+-cos a, sin a) of the planes through the eye at half-angle a, in (axis, z)
        norm = np.hypot(1.0, half)
        for sign in (1.0, -1.0):
            beyond |= (sign * centres[:, axis] + half * centres[:, 2]) / norm > radius
    return beyond & (model.geom_rbound > 0)


def cullable(model: mujoco.MjModel, camera: int) -> bool:
    """Whether geoms outside `camera`'s view leave its image as it is (see the module docstring)."""
    shadows = model.vis.quality.shadowsize > 0 and bool(model.light_castshadow.any())
    reflections = bool((model.mat_reflectance > 0).any())
    perspective = model.cam_projection[camera] == mujoco.mjtProjection.mjPROJ_PERSPECTIVE
    return perspective and not model.cam_sensorsize[camera].any() and not shadows and not reflections


@contextlib.contextmanager
def culled(model: mujoco.MjModel, data: mujoco.MjData, camera: int, aspect: float):
    """Within the block, the geoms outside the camera's view (`outside_view`) are in `UNDRAWN_GROUP`: a scene
    updated for that camera leaves them out. Their groups are restored afterwards."""
    if not cullable(model, camera):
        yield
        return
    groups = model.geom_group.copy()
    model.geom_group[outside_view(model, data, camera, aspect)] = UNDRAWN_GROUP
    try:
        yield
    finally:
        model.geom_group[:] = groups
