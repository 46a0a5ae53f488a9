"""Level of detail (issue 29): a large mesh far away is drawn simplified, picked by distance, and can be turned off.

What LOD must keep: depth is exact for the drawn surface, segmentation and instance ids are the object's, the
same pose renders the same bytes, and a simplified mesh does not shadow itself.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
import trimesh

from aerial_sim.config import ParamsError
from aerial_sim.world.assets import SurfaceMaps, SurfacePart
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.lod import levels_of
from aerial_sim.world.scene import load_scene
from aerial_sim.world.surface_tables import render_surfaces

LEVEL = (1.0, 0.0, 0.0, 0.0)  # looking east
SIZE = dict(width=160, height=120, hfov_deg=90.0, max_range_m=500.0)  # f = 80 px


@pytest.fixture(scope="module")
def sphere_glb(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lod")
    sphere = trimesh.creation.icosphere(subdivisions=5, radius=1.0)  # 20 480 triangles
    (folder / "sphere.glb").write_bytes(trimesh.Scene(sphere).export(file_type="glb"))
    return folder


def sphere_scene(folder, distance: float, lod: str = "{}", lighting: str = "{}"):
    path = folder / f"sphere_{distance}_{abs(hash(lod + lighting))}.yaml"
    path.write_text(textwrap.dedent(f"""\
        objects:
          - {{name: ball, shape: mesh, file: sphere.glb, position: [{distance}, 0, 5], segmentation_id: 7}}
        lod: {lod}
        lighting: {lighting}
        """))
    return load_scene(path)


def drawn_levels(camera: CameraModel, frame_hits) -> set[int]:
    _, groups = render_surfaces(camera.scene)
    on_ball = frame_hits.surface == 2
    return set(np.unique(groups.level[frame_hits.triangle[on_ball]]).tolist())


def hits_of(camera: CameraModel, position):
    R, origin = camera.optical_pose(position, LEVEL)
    p = camera.params
    return camera.caster.rasterizer.hits(origin, R, (camera.fx, camera.fy, camera.cx, camera.cy), (p.width, p.height),
                                         camera._world_rays(R), camera._unit_rays_optical, lod_pixels=camera.lod_pixels)


def test_levels_are_quarters_of_each_other_and_their_triangles_grow():
    sphere = trimesh.creation.icosphere(subdivisions=5, radius=1.0)
    levels = levels_of([SurfacePart(np.asarray(sphere.triangles))], min_triangles=256)
    counts = [level.triangle_count for level in levels]
    assert counts[0] == 20480 and len(levels) >= 5
    for before, after in zip(counts, counts[1:]):
        assert 0.2 < after / before < 0.3
    sizes = [level.size for level in levels]
    for before, after in zip(sizes, sizes[1:]):
        assert 1.8 < after / before < 2.3  # a quarter of the triangles over the same area: twice as wide
    for level in levels[1:]:  # still the unit sphere, within a fraction of a triangle
        radii = np.linalg.norm(level.parts[0].triangles.reshape(-1, 3), axis=1)
        assert np.all(np.abs(radii - 1.0) < 0.5 * level.size)
    assert len(levels_of([SurfacePart(np.asarray(sphere.triangles))], min_triangles=30000)) == 1  # too small


def tessellated_square(n: int = 24) -> np.ndarray:
    """The triangles of the square [-1, 1]^2 at z = 0, cut into n x n cells of two triangles each."""
    y, x = np.mgrid[0:n + 1, 0:n + 1] / n
    vertices = np.stack([2 * x - 1, 2 * y - 1, np.zeros_like(x)], axis=-1).reshape(-1, 3)
    index = np.arange((n + 1) ** 2).reshape(n + 1, n + 1)
    a, b, c, d = index[:-1, :-1].ravel(), index[:-1, 1:].ravel(), index[1:, 1:].ravel(), index[1:, :-1].ravel()
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return np.asarray(trimesh.Trimesh(vertices, faces, process=False).triangles)


def test_a_simplified_textured_plane_keeps_its_texture_coordinates():
    """A finely tessellated textured quad simplifies to a few triangles whose uv are the original's affine map."""
    triangles = tessellated_square()
    uv_of = lambda p: np.stack([(p[..., 0] + 1) / 2 * 3.0, (p[..., 1] + 1) / 2 * 3.0], axis=-1)  # noqa: E731 repeats
    texture = np.zeros((8, 8, 3), np.uint8)
    part = SurfacePart(triangles, uv_of(triangles).astype(np.float32), None, texture)
    levels = levels_of([part], min_triangles=256)
    assert len(levels) >= 2
    coarse = levels[-1].parts[0]
    assert len(coarse.triangles) < len(part.triangles) / 8
    np.testing.assert_allclose(coarse.uv, uv_of(coarse.triangles), atol=1e-5)


def test_a_simplified_plane_with_only_an_occlusion_map_keeps_both_uv_sets():
    """Issue 29: a part whose only texture is a normal/occlusion/emissive map (no base colour) keeps its uv and
    TEXCOORD_1 on its coarse levels, so the far view samples the map as the near view does."""
    triangles = tessellated_square()
    uv_of = lambda p: np.stack([(p[..., 0] + 1) / 2, (p[..., 1] + 1) / 2], axis=-1)  # noqa: E731
    uv1_of = lambda p: np.stack([1 - (p[..., 0] + 1) / 2, 2 * (p[..., 1] + 1)], axis=-1)  # noqa: E731 mirrored
    maps = SurfaceMaps(occlusion_texture=np.full((4, 4, 3), 64, np.uint8))
    part = SurfacePart(triangles, uv_of(triangles).astype(np.float32), (200.0, 200.0, 200.0), None, maps=maps,
                       uv1=uv1_of(triangles).astype(np.float32))
    coarse = levels_of([part], min_triangles=256)[-1].parts[0]
    assert len(coarse.triangles) < len(triangles) / 8 and coarse.maps is maps
    np.testing.assert_allclose(coarse.uv, uv_of(coarse.triangles), atol=1e-5)
    np.testing.assert_allclose(coarse.uv1, uv1_of(coarse.triangles), atol=1e-5)


@pytest.mark.parametrize("distance", [2.0, 6.0, 12.0, 60.0])
def test_the_camera_draws_the_level_its_distance_calls_for_and_none_with_lod_off(sphere_glb, distance):
    scene = sphere_scene(sphere_glb, distance)
    camera = CameraModel(CameraParams(**SIZE), scene)
    levels = scene.cache["lod_levels"][scene.mesh_path(scene.objects[0])]
    gap = distance - 1.0 - 0.1  # from the camera centre (0.1 m ahead of base_link) to the sphere's box
    wanted = max([k for k, level in enumerate(levels) if level.size * camera.fx <= scene.lod.pixels * gap] + [0])
    assert drawn_levels(camera, hits_of(camera, (0.0, 0.0, 5.0))) == {wanted}
    assert wanted == {2.0: 0, 6.0: 2, 12.0: 3, 60.0: 4}[distance]  # near: the full mesh; far: a coarse one

    camera.lod_pixels = 0.0  # LOD off at run time: the full mesh at any distance
    assert drawn_levels(camera, hits_of(camera, (0.0, 0.0, 5.0))) == {0}
    off = sphere_scene(sphere_glb, distance, lod="{enabled: false}")
    assert render_surfaces(off)[1] is None  # LOD off in the scene file: no levels are even made
    assert CameraModel(CameraParams(**SIZE), off).caster.rasterizer.lod_groups == 0


def test_depth_is_exact_for_the_drawn_surface_and_images_repeat_bytewise(sphere_glb):
    scene = sphere_scene(sphere_glb, 12.0, lighting='{time_of_day: "2026-06-21 14:00:00", shadows: true}')
    camera = CameraModel(CameraParams(**SIZE, depth_mode="perspective"), scene)
    position = (0.0, 0.0, 5.0)
    hits = hits_of(camera, position)
    assert drawn_levels(camera, hits) - {0}  # simplified
    surfaces, _ = render_surfaces(scene)
    R, origin = camera.optical_pose(position, LEVEL)
    frame = camera.render(position, LEVEL, instance=True)
    ball = frame.segmentation.ravel() == 7
    assert ball.sum() > 50 and np.all(frame.instance.ravel()[ball] == 2)
    points = origin + camera._world_rays(R)[ball] * frame.depth.ravel()[ball, None]
    corners = surfaces.triangles[hits.triangle[ball]]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    off_plane = np.abs(np.einsum("ij,ij->i", points - corners[:, 0], normals))
    assert off_plane.max() < 1e-4 * 12  # on the drawn triangle's plane, to float32 rounding of the distance

    again = camera.render(position, LEVEL, instance=True)
    for image in ("depth", "segmentation", "color", "instance"):
        assert getattr(frame, image).tobytes() == getattr(again, image).tobytes()

    camera.lod_pixels = 0.0
    full = camera.render(position, LEVEL)
    both = ball & (full.segmentation.ravel() == 7)
    assert both.sum() > 0.9 * ball.sum()  # the same silhouette but for edge pixels
    # Depth differs by the simplification only, well under a level's triangle size (0.28 m here); colour by the
    # coarser facets' normals.
    assert np.abs(frame.depth.ravel()[both] - full.depth.ravel()[both]).max() < 0.1
    colour_gap = np.abs(frame.color.reshape(-1, 3)[both].astype(int) - full.color.reshape(-1, 3)[both]).mean()
    assert colour_gap < 8.0

    # No self-shadowing: a convex ball cannot shade itself, and its simplified surface (inside the full mesh, which
    # casts the shadows) does not either, because its shadow rays start a level's triangle size off it.
    camera.lod_pixels = scene.lod.pixels
    unshadowed = sphere_scene(sphere_glb, 12.0, lighting='{time_of_day: "2026-06-21 14:00:00", shadows: false}')
    plain = CameraModel(CameraParams(**SIZE, depth_mode="perspective"), unshadowed).render(position, LEVEL)
    assert np.array_equal(frame.color.reshape(-1, 3)[ball], plain.color.reshape(-1, 3)[ball])


def test_bad_lod_settings_are_one_error_naming_the_field(tmp_path):
    for body, field in (("lod: {pixels: 0}", "pixels"), ("lod: {min_triangles: 0}", "min_triangles"),
                        ("lod: {pixel: 2}", "pixel")):
        path = tmp_path / "bad.yaml"
        path.write_text(f"objects: []\n{body}\n")
        with pytest.raises(ParamsError, match=rf"bad.yaml: lod.*{field}"):
            load_scene(path)
