"""Procedural Staunton-like chess pieces: collision primitives and render meshes, numpy only.

Frame and units: every length is in metres, in the piece frame: z up along the piece's axis, origin at the
centre of the base's bottom face (the piece stands on z = 0), the knight's snout points along +x. Masses are
in kg. `scene.py` turns `PieceShape.collision` into MuJoCo geoms and `piece_mesh` into a visual mesh.

Sizes suit 25 mm squares: base diameters 11-13.5 mm, heights 26 mm (pawn) to 44 mm (king). Every collision
primitive stays within the base radius horizontally (the knight's snout overhangs it by 0.5 mm), so pieces on
neighbouring squares never touch.

Grasping: the SO-101's jaws close along the piece's local y axis at `grasp_height`, with pads ~12 mm tall.
Around the grasp height (at least +-4 mm, and +-6 mm in the render meshes) each piece is a single
straight-sided primitive, a cylinder (the knight's rendered neck is a box of about the same width). Wider render features (collars,
base flares) sit outside the pads' span, so the pads see the same section they collide with.

Profiles are written in millimetres below because that is how a piece is measured; they are converted once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS = ("pawn", "knight", "bishop", "rook", "queen", "king")

_MM = 1e-3
_G = 1e-3
_IDENTITY = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Primitive:
    """One collision primitive in the piece frame (z up, origin at the centre of the base's bottom face, metres)."""

    type: str
    """"cylinder" | "box" | "sphere" | "capsule" | "ellipsoid" (MuJoCo geom types)."""
    size: tuple[float, ...]
    """MuJoCo's geom `size` for that type (half-sizes; cylinder = (radius, half_length))."""
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float] = _IDENTITY
    """w x y z."""
    mass: float = 0.0
    """kg; the primitives' masses sum to the piece mass."""


@dataclass(frozen=True)
class PieceShape:
    kind: str
    height: float
    """Total height, m."""
    base_radius: float
    """Radius of the bottom disc, m."""
    grasp_height: float
    """z (above the base bottom) where the gripper jaws should close."""
    grasp_half_width: float
    """Half-width of the collision shape across the jaws (local y) at grasp_height."""
    mass: float
    """kg."""
    collision: tuple[Primitive, ...]


# ---- collision primitives, given in mm and grams -------------------------------------------------------------

def _cyl(r: float, z0: float, z1: float, grams: float) -> Primitive:
    return Primitive("cylinder", (r * _MM, (z1 - z0) / 2 * _MM), (0.0, 0.0, (z0 + z1) / 2 * _MM), mass=grams * _G)


def _sphere(r: float, zc: float, grams: float) -> Primitive:
    return Primitive("sphere", (r * _MM,), (0.0, 0.0, zc * _MM), mass=grams * _G)


def _solid(kind: str, half: tuple[float, float, float], centre: tuple[float, float, float], grams: float) -> Primitive:
    return Primitive(kind, tuple(h * _MM for h in half), tuple(c * _MM for c in centre), mass=grams * _G)


# ---- render profiles: (r, z) in mm from the bottom of the axis to its top -------------------------------------

def _arc(zc: float, a: float, c: float, phi0: float, phi1: float, n: int) -> list[tuple[float, float]]:
    """Points of an ellipse of revolution (radius a, half-height c, centre zc); phi from the bottom pole, degrees."""
    phis = np.radians(np.linspace(phi0, phi1, n))
    return [(a * math.sin(p), zc - c * math.cos(p)) for p in phis]


def _ball_top(zc: float, r: float, phi0: float, n: int) -> list[tuple[float, float]]:
    """A ball from polar angle phi0 up to its top on the axis."""
    return _arc(zc, r, r, phi0, 180.0, n)[:-1] + [(0.0, zc + r)]


def _base(r: float) -> list[tuple[float, float]]:
    """Bottom disc with a rounded flare: the wide foot that makes Staunton pieces stand."""
    return [(0.0, 0.0), (r, 0.0), (r, 1.4), (r - 0.4, 2.1), (r - 1.0, 3.0), (r - 1.6, 4.4)]


def _collar(zb: float, r: float, neck: float) -> list[tuple[float, float]]:
    """A thin ring between stem and head, the Staunton signature."""
    return [(r - 0.2, zb), (r, zb + 0.5), (r - 0.2, zb + 1.0), (neck, zb + 1.3)]


@dataclass(frozen=True)
class _Spec:
    height: float          # mm
    base_radius: float     # mm
    grasp_height: float    # mm
    mass: float            # g
    profile: tuple[tuple[float, float], ...]
    collision: tuple[Primitive, ...]
    grasp_index: int       # which primitive the jaws close on


def _specs() -> dict[str, _Spec]:
    # Base primitives carry 40% of the mass (real pieces are weighted with lead in the foot).
    return {
        "pawn": _Spec(26.0, 5.5, 12.0, 4.2,
                      (*_base(5.5), (4.2, 6.0), (4.0, 12.0), (3.7, 17.8), (4.8, 18.1), (5.0, 18.6), (4.8, 19.1),
                       *_ball_top(21.5, 4.5, 58.0, 9)),
                      (_cyl(5.5, 0.0, 3.0, 1.68), _cyl(4.0, 3.0, 18.0, 1.26), _sphere(4.5, 21.5, 1.26)), 1),
        "rook": _Spec(28.0, 6.0, 12.5, 6.0,
                      (*_base(6.0), (4.45, 6.0), (4.3, 12.5), (4.1, 19.5), (4.6, 20.3), (5.3, 21.2),
                       (5.3, 28.0), (4.0, 28.0), (4.0, 26.6), (0.0, 26.6)),
                      (_cyl(6.0, 0.0, 3.0, 2.4), _cyl(4.3, 3.0, 21.0, 2.1), _cyl(5.3, 21.0, 28.0, 1.5)), 1),
        "bishop": _Spec(36.0, 6.0, 15.5, 6.0,
                        (*_base(6.0), (4.3, 7.0), (4.0, 15.5), (3.7, 22.2), *_collar(22.3, 5.0, 3.0),
                         *_arc(28.5, 4.3, 4.8, 40.0, 160.0, 9), (0.9, 33.2), *_ball_top(34.4, 1.6, 50.0, 6)),
                        (_cyl(6.0, 0.0, 3.0, 2.4), _cyl(4.0, 3.0, 23.5, 2.0),
                         _solid("ellipsoid", (4.3, 4.3, 4.8), (0.0, 0.0, 28.5), 1.4), _sphere(1.6, 34.4, 0.2)), 1),
        "queen": _Spec(40.0, 6.5, 17.0, 8.0,
                       (*_base(6.5), (4.5, 7.0), (4.0, 17.0), (3.6, 26.2), *_collar(26.3, 5.0, 3.2),
                        (3.0, 28.5), (3.6, 30.5), (4.6, 32.5), (5.4, 34.0), (5.4, 34.6), (2.8, 34.8),
                        *_ball_top(37.2, 2.8, 50.0, 8)),
                       (_cyl(6.5, 0.0, 3.0, 3.2), _cyl(4.0, 3.0, 28.0, 2.6), _cyl(5.2, 28.0, 34.6, 1.7),
                        _sphere(2.8, 37.2, 0.5)), 1),
        "king": _Spec(44.0, 6.75, 19.0, 9.0,
                      (*_base(6.75), (4.6, 7.5), (4.0, 19.0), (3.7, 28.2), *_collar(28.3, 5.2, 3.4),
                       (3.3, 30.5), (3.9, 32.5), (4.8, 34.5), (5.1, 36.0), (4.8, 36.6), (3.5, 37.2), (1.8, 37.7),
                       (0.0, 37.8)),
                      (_cyl(6.75, 0.0, 3.0, 3.6), _cyl(4.0, 3.0, 30.0, 2.9), _cyl(5.0, 30.0, 37.8, 2.2),
                       _solid("box", (0.6, 0.6, 3.1), (0.0, 0.0, 40.9), 0.3)), 1),
        # The knight's neck collides as a cylinder: a box neck met the flat pads in box-box contacts whose
        # spurious normals lifted and tipped the knight as the jaws came down beside it.
        "knight": _Spec(32.0, 6.0, 14.0, 6.4,
                        (*_base(6.0), (4.6, 5.2), (4.9, 5.6), (4.6, 6.0), (0.0, 6.0)),
                        (_cyl(6.0, 0.0, 3.0, 2.56), _cyl(4.0, 3.0, 22.5, 2.24),
                         _solid("ellipsoid", (5.0, 3.4, 5.0), (1.5, 0.0, 27.0), 1.6)), 1),
    }


_SPECS = _specs()


def _spec(kind: str) -> _Spec:
    if kind not in _SPECS:
        raise ValueError(f"unknown piece kind {kind!r}; known kinds: {', '.join(KINDS)}")
    return _SPECS[kind]


def piece_shape(kind: str) -> PieceShape:
    """Dimensions, grasp point, mass and collision primitives of one kind of piece."""
    s = _spec(kind)
    grasp = s.collision[s.grasp_index]
    half_width = grasp.size[0] if grasp.type == "cylinder" else grasp.size[1]
    return PieceShape(kind=kind, height=s.height * _MM, base_radius=s.base_radius * _MM,
                      grasp_height=s.grasp_height * _MM, grasp_half_width=half_width,
                      mass=sum(p.mass for p in s.collision), collision=s.collision)


# ---- meshes ---------------------------------------------------------------------------------------------------

_Mesh = tuple[np.ndarray, np.ndarray]


def _lathe(profile: list[tuple[float, float]] | tuple[tuple[float, float], ...], segments: int) -> _Mesh:
    """Surface of revolution; the profile starts and ends on the axis, which closes both ends with fans.

    Walking the profile bottom-to-top with the outside on the right of the path (r grows outward) makes
    every quad counter-clockwise seen from outside, recesses included.
    """
    pts = np.asarray(profile, dtype=np.float64)
    ring = pts[1:-1]
    n = len(ring)
    theta = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    rings = np.stack([np.outer(ring[:, 0], np.cos(theta)), np.outer(ring[:, 0], np.sin(theta)),
                      np.repeat(ring[:, 1:2], segments, axis=1)], axis=-1).reshape(-1, 3)
    bottom, top = len(rings), len(rings) + 1
    verts = np.vstack([rings, [[0.0, 0.0, pts[0, 1]], [0.0, 0.0, pts[-1, 1]]]])
    j = np.arange(segments)
    jn = (j + 1) % segments
    faces = [np.stack([np.full(segments, bottom), jn, j], axis=1)]
    for i in range(n - 1):
        a, b = i * segments, (i + 1) * segments
        faces.append(np.stack([a + j, a + jn, b + jn], axis=1))
        faces.append(np.stack([a + j, b + jn, b + j], axis=1))
    last = (n - 1) * segments
    faces.append(np.stack([last + j, last + jn, np.full(segments, top)], axis=1))
    return verts, np.vstack(faces)


def _rotate(v: np.ndarray, quat: tuple[float, float, float, float]) -> np.ndarray:
    w, x, y, z = quat
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return v @ r.T


def _pitch(deg: float) -> tuple[float, float, float, float]:
    """Rotation about +y; positive angles tip the +x end down (the snout)."""
    h = math.radians(deg) / 2
    return (math.cos(h), 0.0, math.sin(h), 0.0)


def _ellipsoid(radii: tuple[float, float, float], centre: tuple[float, float, float], quat: tuple[float, ...],
               segments: int) -> _Mesh:
    # A unit sphere is the lathe of a semicircle; positive scaling keeps the winding outward.
    v, f = _lathe(_ball_top(0.0, 1.0, 0.0, max(5, segments // 3 + 1)), segments)
    v = v * np.asarray(radii)
    return _rotate(v, quat) + np.asarray(centre), f


def _box(half: tuple[float, float, float], centre: tuple[float, float, float],
         quat: tuple[float, ...] = _IDENTITY) -> _Mesh:
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    # Corner index = 4*(x>0) + 2*(y>0) + (z>0); each face listed counter-clockwise from outside.
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    faces = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))])
    return _rotate(signs * np.asarray(half), quat) + np.asarray(centre), faces


def _concat(parts: list[_Mesh]) -> _Mesh:
    verts, faces, offset = [], [], 0
    for v, f in parts:
        verts.append(v)
        faces.append(f + offset)
        offset += len(v)
    return np.vstack(verts), np.vstack(faces)


def _knight_parts(segments: int) -> list[_Mesh]:
    """Horse head on a neck, facing +x, built from overlapping closed solids (fine for rendering)."""
    seg = max(8, (2 * segments) // 3)
    return [
        _box((4.5, 4.0, 8.75), (-0.5, 0.0, 13.75)),                        # neck (collides as a 4 mm cylinder)
        _ellipsoid((2.5, 3.6, 5.5), (2.6, 0.0, 11.5), _IDENTITY, seg),      # chest
        _ellipsoid((1.6, 2.2, 8.0), (-4.0, 0.0, 19.0), _pitch(-12.0), seg),  # mane along the back of the neck
        _ellipsoid((5.2, 3.3, 3.6), (1.2, 0.0, 26.8), _pitch(25.0), seg),  # head, snout dipping forward
        _ellipsoid((2.0, 2.8, 2.3), (4.8, 0.0, 24.2), _pitch(15.0), seg),  # muzzle
        _box((0.7, 0.5, 1.2), (-1.4, 1.6, 30.7), _pitch(-10.0)),           # ears
        _box((0.7, 0.5, 1.2), (-1.4, -1.6, 30.7), _pitch(-10.0)),
    ]


RENDER_SEGMENTS = 12
"""Sides of the pieces' lathed render meshes: fewer sides render faster (docs/benchmarks.md); at 256 pixels the
facets stay about a pixel wide in the front camera."""


def piece_mesh(kind: str, segments: int = RENDER_SEGMENTS) -> tuple[np.ndarray, np.ndarray]:
    """Render mesh in the piece frame: vertices (V, 3) float32 in metres, faces (F, 3) int32.

    Closed, outward-facing (counter-clockwise seen from outside); the knight is several closed sub-meshes.
    """
    if segments < 6:
        raise ValueError(f"segments must be at least 6, got {segments}")
    s = _spec(kind)
    parts = [_lathe(s.profile, segments)]
    if kind == "knight":
        parts += _knight_parts(segments)
    elif kind == "king":
        parts += [_box((0.6, 0.6, 3.3), (0.0, 0.0, 40.7)), _box((2.0, 0.6, 0.55), (0.0, 0.0, 41.6))]
    verts, faces = _concat(parts)
    return (verts * _MM).astype(np.float32), faces.astype(np.int32)
