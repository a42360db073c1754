"""Geometry facts about the procedural chess pieces, checked against hand-computable bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chess_sim.sim.pieces import KINDS, Primitive, piece_mesh, piece_shape

MM = 1e-3
EXPECTED = {  # kind: (height mm, mass g)
    "pawn": (26.0, 4.2), "knight": (32.0, 6.4), "bishop": (36.0, 6.0),
    "rook": (28.0, 6.0), "queen": (40.0, 8.0), "king": (44.0, 9.0),
}


def z_range(p: Primitive) -> tuple[float, float]:
    """Vertical extent of an axis-aligned primitive."""
    assert p.quat == (1.0, 0.0, 0.0, 0.0)
    if p.type in ("cylinder", "capsule"):
        half = p.size[1] + (p.size[0] if p.type == "capsule" else 0.0)
    else:
        half = p.size[2] if p.type in ("box", "ellipsoid") else p.size[0]
    return p.pos[2] - half, p.pos[2] + half


def horizontal_reach(p: Primitive) -> float:
    """Farthest horizontal distance from the piece axis (conservative for ellipsoids)."""
    x, y = p.pos[0], p.pos[1]
    if p.type == "box":
        return max(math.hypot(x + sx * p.size[0], y + sy * p.size[1]) for sx in (-1, 1) for sy in (-1, 1))
    radius = max(p.size[:2]) if p.type == "ellipsoid" else p.size[0]
    return math.hypot(x, y) + radius


def grasp_primitive(kind: str) -> Primitive:
    shape = piece_shape(kind)
    g = shape.grasp_height
    hits = [p for p in shape.collision if z_range(p)[0] < g < z_range(p)[1]]
    assert len(hits) == 1, f"{kind}: one primitive must hold the grasp height"
    return hits[0]


@pytest.fixture(scope="module", params=KINDS)
def kind(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def mesh(kind):
    return piece_mesh(kind)


def test_masses_sum_to_the_piece_mass(kind):
    shape = piece_shape(kind)
    assert shape.mass == pytest.approx(EXPECTED[kind][1] * 1e-3, rel=1e-9)
    assert sum(p.mass for p in shape.collision) == pytest.approx(shape.mass, rel=1e-9)
    assert all(p.mass > 0 for p in shape.collision)
    assert 2 <= len(shape.collision) <= 4


def test_base_carries_about_40_percent(kind):
    shape = piece_shape(kind)
    base = shape.collision[0]
    assert base.type == "cylinder" and z_range(base)[0] == pytest.approx(0.0, abs=1e-12)
    assert base.size[0] == pytest.approx(shape.base_radius)
    assert base.mass / shape.mass == pytest.approx(0.4, abs=0.01)


def test_height_matches_mesh_and_primitives(kind, mesh):
    shape = piece_shape(kind)
    verts, _ = mesh
    assert shape.height == pytest.approx(EXPECTED[kind][0] * MM)
    assert abs(verts[:, 2].max() - shape.height) <= 1 * MM
    assert abs(max(z_range(p)[1] for p in shape.collision) - shape.height) <= 1 * MM
    assert verts[:, 2].min() == pytest.approx(0.0, abs=1e-7)


def test_base_diameter_fits_a_25mm_square(kind):
    assert 11 * MM - 1e-9 <= 2 * piece_shape(kind).base_radius <= 13.5 * MM + 1e-9


def test_nothing_overhangs_the_base(kind, mesh):
    shape = piece_shape(kind)
    for p in shape.collision:
        assert horizontal_reach(p) <= shape.base_radius + 1 * MM
    verts, _ = mesh
    assert np.hypot(verts[:, 0], verts[:, 1]).max() <= shape.base_radius + 1 * MM


def test_mesh_is_closed_and_consistently_oriented(kind, mesh):
    verts, faces = mesh
    assert verts.dtype == np.float32 and faces.dtype == np.int32
    assert verts.shape[1] == 3 and faces.shape[1] == 3
    assert 200 <= len(faces) <= 1500
    assert faces.min() >= 0 and faces.max() < len(verts)
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    as_set = {tuple(e) for e in directed.tolist()}
    # Every edge used exactly twice, once in each direction: closed and consistently wound.
    assert len(as_set) == len(directed)
    assert all((b, a) in as_set for a, b in as_set)


def test_every_submesh_has_positive_volume(kind, mesh):
    verts, faces = mesh
    v = verts.astype(np.float64)
    parent = list(range(len(verts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, c in faces.tolist():
        parent[find(b)] = find(a)
        parent[find(c)] = find(a)
    roots = np.array([find(f[0]) for f in faces.tolist()])
    signed = np.einsum("ij,ij->i", v[faces[:, 0]], np.cross(v[faces[:, 1]], v[faces[:, 2]])) / 6.0
    for r in np.unique(roots):
        assert signed[roots == r].sum() > 0
    # The whole piece holds more than its grasp section and less than its bounding cylinder.
    shape = piece_shape(kind)
    grip = grasp_primitive(kind)
    grip_volume = 8 * math.prod(grip.size) if grip.type == "box" else 2 * math.pi * grip.size[0] ** 2 * grip.size[1]
    assert grip_volume < signed.sum() < math.pi * shape.base_radius ** 2 * shape.height


def test_grasp_section_is_straight_sided_and_jaw_sized(kind):
    shape = piece_shape(kind)
    grip = grasp_primitive(kind)
    assert grip.type == "cylinder"
    lo, hi = z_range(grip)
    assert lo <= shape.grasp_height - 4 * MM and hi >= shape.grasp_height + 4 * MM
    half_y = grip.size[1] if grip.type == "box" else grip.size[0]
    assert 3.5 * MM <= half_y <= 5 * MM
    assert shape.grasp_half_width == pytest.approx(half_y)
    if grip.type == "box":
        assert grip.size[1] < grip.size[0]  # the narrow side lies across the jaws
    # No other primitive reaches into the +-4 mm band, so the jaws touch only the grasp section.
    for p in shape.collision:
        if p is not grip:
            lo_p, hi_p = z_range(p)
            assert hi_p <= shape.grasp_height - 4 * MM + 1e-9 or lo_p >= shape.grasp_height + 4 * MM - 1e-9
    assert 0.40 <= shape.grasp_height / shape.height <= 0.55


def test_render_mesh_matches_grasp_section(kind, mesh):
    shape = piece_shape(kind)
    verts, _ = mesh
    if kind == "knight":  # the neck is one tall box with vertices only at its ends (z 5 and 22.5 mm)
        band = np.isclose(verts[:, 2], 22.5 * MM, atol=0.01 * MM)
    else:
        band = np.abs(verts[:, 2] - shape.grasp_height) <= 4 * MM
    assert band.any()
    assert np.abs(verts[band, 1]).max() == pytest.approx(shape.grasp_half_width, abs=0.5 * MM)


def test_centre_of_mass_is_low(kind):
    shape = piece_shape(kind)
    com_z = sum(p.mass * p.pos[2] for p in shape.collision) / shape.mass
    assert com_z < 0.45 * shape.height


def test_knight_faces_plus_x():
    verts, _ = piece_mesh("knight")
    assert verts[:, 0].max() > -verts[:, 0].min() + 0.3 * MM  # the muzzle reaches past the mane
    head = piece_shape("knight").collision[-1]
    assert head.pos[0] > 0


def test_pawn_proportions():
    shape = piece_shape("pawn")
    assert shape.base_radius == pytest.approx(5.5 * MM)
    assert shape.grasp_height == pytest.approx(12 * MM)


def test_unknown_kind_raises():
    with pytest.raises(ValueError, match="pawn"):
        piece_shape("dragon")
    with pytest.raises(ValueError, match="king"):
        piece_mesh("dragon")
