"""Worlds and images (issue 29): frames/s of colour + depth + segmentation at 460x320 and 640x480 on one
core, with the lighting off and on (textures, sun, shadows, fog), for ``urban`` and a generated textured
world of >= 200 k triangles (terrain + textured glTF buildings) and the shipped ``city`` scene (OpenStreetMap
buildings on terrain, textured glTF props, sun, shadows, fog); and the load time of a 1 M-triangle glTF world.

Every figure is CPU time of the rendering thread (``time.thread_time``), best of 3 runs of 10 frames: one
core's worth of work, not inflated by other processes on a shared machine. The renderer is single-threaded
(numba kernels without ``parallel``, Embree queried ray packet by ray packet from one thread).

Run: ``tools/dev.sh bench worlds`` (about a minute).
"""

from __future__ import annotations

import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.geometry import ray_caster_of
from aerial_sim.world.scene import load_scene

LIGHTING_ON = ('{time_of_day: "2026-06-21 16:00:00", shadows: true, sky_zenith_color: [70, 120, 200], '
               'fog_density_per_m: 0.004}')


def cpu_ms(render, frames: int = 10) -> float:
    best = float("inf")
    render()
    for _ in range(3):
        start = time.thread_time()
        for _ in range(frames):
            render()
        best = min(best, (time.thread_time() - start) / frames)
    return 1e3 * best


def generated_world(folder: Path, lighting: str, terrain_cells: int = 320, buildings: int = 400) -> Path:
    """A textured world: a heightmap terrain (2 triangles per cell) and textured GLB buildings on it."""
    import trimesh
    from PIL import Image

    rng = np.random.default_rng(29)
    if not (folder / "hills.png").exists():
        y, x = np.mgrid[0:terrain_cells + 1, 0:terrain_cells + 1] / terrain_cells
        heights = 0.5 + 0.25 * np.sin(6 * x) * np.cos(5 * y) + 0.05 * rng.standard_normal(x.shape)
        Image.fromarray((np.clip(heights, 0, 1) * 65535).astype(np.uint16)).save(folder / "hills.png")
        facade = np.full((64, 64, 3), (180, 170, 150), np.uint8)
        facade[8::16, :] = (60, 60, 70)
        facade[:, 8::16] = (60, 60, 70)
        grass = (rng.uniform(0.8, 1.0, (256, 256, 1)) * np.array([90, 140, 70])).astype(np.uint8)
        Image.fromarray(grass).save(folder / "grass.png")
        box = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
        box.unmerge_vertices()
        uv = np.stack([box.vertices[:, 0] + box.vertices[:, 1] + 0.5, box.vertices[:, 2] + 0.5], axis=1) * 4
        box.visual = trimesh.visual.TextureVisuals(uv=uv, material=trimesh.visual.material.PBRMaterial(
            baseColorTexture=Image.fromarray(facade)))
        (folder / "building.glb").write_bytes(trimesh.Scene(box).export(file_type="glb"))
    objects = []
    for k in range(buildings):
        x, y = rng.uniform(-140, 140, 2)
        height = float(rng.uniform(6, 30))
        objects.append(f"  - {{name: b{k}, shape: mesh, file: building.glb, position: [{x:.1f}, {y:.1f}, "
                       f"{height / 2 + 10:.1f}], yaw_deg: {rng.uniform(0, 90):.0f}, segmentation_id: 20, "
                       f"material: brick}}")
    path = folder / "generated.yaml"
    path.write_text(textwrap.dedent(f"""\
        ground: {{material: grass}}
        terrain: {{file: hills.png, size_m: [400, 400], height_range_m: [0, 20], texture: grass.png}}
        lighting: {lighting}
        objects:
        """) + "\n".join(objects) + "\n")
    return path


def main(argv: list[str]) -> int:
    sizes = [(460, 320), (640, 480)]
    print("colour + depth + segmentation, ms CPU per frame on one core (frames/s), best of 3 x 10 frames")
    print(f"{'world':<22} {'triangles':>9} {'lighting':>9} " + " ".join(f"{w}x{h:<12}" for w, h in sizes))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        worlds = []
        urban_lit = folder / "urban_lit.yaml"
        base = load_scene("urban").base_dir
        urban_lit.write_text(base.joinpath("urban.yaml").read_text().replace("file: meshes/", f"file: {base}/meshes/")
                             + f"lighting: {LIGHTING_ON}\n")
        worlds += [("urban", "urban", "off", (0.0, 0.0, 2.0)), ("urban", str(urban_lit), "on", (0.0, 0.0, 2.0))]
        generated_off = generated_world(folder, "{}")
        scene_off = load_scene(str(generated_off))
        height = float(scene_off.terrain.height_at(0.0, -150.0)) + 25.0
        worlds.append(("generated (textured)", str(generated_off), "off", (0.0, -150.0, height)))
        (folder / "generated_lit.yaml").write_text(generated_off.read_text().replace("lighting: {}",
                                                                                      f"lighting: {LIGHTING_ON}"))
        worlds.append(("generated (textured)", str(folder / "generated_lit.yaml"), "on", (0.0, -150.0, height)))
        worlds.append(("city (OSM Helsinki)", "city", "on", (-30.0, -40.0, 22.0)))
        orientation = (np.cos(np.radians(45) / 2), 0.0, 0.0, np.sin(np.radians(45) / 2))  # yaw 45: across the town
        for label, source, lighting, position in worlds:
            scene = load_scene(source)
            figures = []
            for width, height_px in sizes:
                camera = CameraModel(CameraParams(width=width, height=height_px), scene)
                figures.append(cpu_ms(lambda: camera.render(position, orientation)))
            print(f"{label:<22} {ray_caster_of(scene).triangle_count:>9} {lighting:>9} "
                  + " ".join(f"{ms:6.1f} ({1e3 / ms:5.1f})" for ms in figures))

        import trimesh

        sphere = trimesh.creation.icosphere(subdivisions=8, radius=20.0)  # 1.3 M triangles
        (folder / "big.glb").write_bytes(trimesh.Scene(sphere).export(file_type="glb"))
        (folder / "big.yaml").write_text("objects:\n  - {name: big, shape: mesh, file: big.glb, position: [0, 0, 30], "
                                         "segmentation_id: 3}\n")
        start = time.perf_counter()
        scene = load_scene(str(folder / "big.yaml"))
        camera = CameraModel(CameraParams(), scene)
        camera.render((0.0, -60.0, 30.0), (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)))
        loaded = time.perf_counter() - start
        frame_ms = cpu_ms(lambda: camera.render((0.0, -60.0, 30.0), (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))),
                          3)
        print(f"{ray_caster_of(scene).triangle_count / 1e6:.2f} M-triangle glTF world: loaded and first frame in "
              f"{loaded:.1f} s wall (goal < 30 s); then {frame_ms:.0f} ms CPU a 460x320 frame")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
