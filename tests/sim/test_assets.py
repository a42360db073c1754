import numpy as np
import pytest

from chess_sim.sim.assets import cluster_vertices


def test_clustering_merges_vertices_of_one_cell_into_their_mean():
    # a quad (two triangles) whose right edge has two vertices 0.4 apart in the same unit cell
    vertices = np.array([[0.1, 0.1, 0.1], [2.1, 0.1, 0.1], [2.3, 0.5, 0.1], [0.1, 2.1, 0.1], [5.5, 5.5, 0.5]])
    faces = np.array([[0, 1, 3], [1, 2, 3]])
    kept_vertices, kept_faces = cluster_vertices(vertices, faces, cell=1.0)
    # vertices 1 and 2 share cell (2, 0, 0): merged at their mean; vertex 4 is unused and dropped
    assert kept_vertices.shape == (3, 3)
    corners = kept_vertices[kept_faces]
    np.testing.assert_allclose(corners[0], [[0.1, 0.1, 0.1], [2.2, 0.3, 0.1], [0.1, 2.1, 0.1]])
    assert len(kept_faces) == 1  # the second triangle had two corners in one cell


def test_clustering_keeps_winding_and_drops_repeated_triangles():
    vertices = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.2, 0.2, 0.0]])
    faces = np.array([[0, 1, 2], [3, 1, 2], [2, 1, 0]])  # vertex 3 merges into 0: the second repeats the first
    kept_vertices, kept_faces = cluster_vertices(vertices, faces, cell=1.0)
    assert len(kept_faces) == 1
    a, b, c = kept_vertices[kept_faces[0]]
    assert np.cross(b - a, c - a)[2] > 0  # still counter-clockwise seen from +z
    np.testing.assert_allclose(a, [0.1, 0.1, 0.0])


def test_a_fine_grid_changes_nothing():
    rng = np.random.default_rng(0)
    vertices = rng.uniform(0, 1, (30, 3))
    faces = np.array([[i, i + 1, i + 2] for i in range(0, 27, 3)])
    kept_vertices, kept_faces = cluster_vertices(vertices, faces, cell=1e-6)
    np.testing.assert_allclose(kept_vertices[kept_faces], vertices[faces])


def test_cell_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        cluster_vertices(np.zeros((3, 3)), np.array([[0, 1, 2]]), cell=0.0)
