"""Worlds and images (issue 29): frames/s of colour + depth + segmentation at 460x320 and 640x480 on one
core, with the lighting off and on (textures, sun, shadows, fog), for ``urban`` and a generated textured
world of >= 200 k triangles (terrain + textured glTF buildings) and the shipped ``city`` scene (OpenStreetMap
buildings on terrain, textured glTF props, sun, shadows, fog); and the load time of a 1 M-triangle glTF world.

Every frame figure is CPU time of the rendering thread (``time.thread_time``), best of 3 runs of 10 frames:
one core's worth of work, not inflated by other processes on a shared machine. The renderer is
single-threaded (numba kernels without ``parallel``).

``--against REV`` measures the shipped ``urban`` and ``city`` views with the code of git revision REV and
with this tree, alternately in two rounds (each in its own process, the best of each kept), and prints and
records both side by side: on a shared machine only ratios taken in the same minutes mean anything.

``--lod`` measures large worlds (256 spheres of 5 120 triangles; one 1.3 M-triangle sphere) at 640x480 with level
of detail on and off.

Run: ``tools/dev.sh bench worlds`` (a few minutes), ``tools/dev.sh bench worlds --against db8ba97``,
``tools/dev.sh bench worlds --lod``, ``tools/dev.sh bench worlds --load`` (the 1.3 M-triangle world's load only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SIZES = [(460, 320), (640, 480)]
YAW_45 = (float(np.cos(np.radians(45) / 2)), 0.0, 0.0, float(np.sin(np.radians(45) / 2)))  # across the town
#: The shipped scenes' views: urban from its start point, the city from above a street, looking across the town.
SHIPPED_VIEWS = {"urban": ((0.0, 0.0, 2.0), YAW_45), "city": ((-30.0, -40.0, 22.0), YAW_45)}
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


def shipped_views_ms() -> dict[str, float]:
    """CPU ms a frame of each shipped view at each size, with whatever code ``aerial_sim`` imports."""
    from aerial_sim.world.camera import CameraModel, CameraParams
    from aerial_sim.world.ray_caster import ray_caster_of
    from aerial_sim.world.scene import load_scene

    figures = {}
    for name, (position, orientation) in SHIPPED_VIEWS.items():
        scene = load_scene(name)
        for width, height in SIZES:
            camera = CameraModel(CameraParams(width=width, height=height), scene)
            figures[f"{name} {width}x{height}"] = cpu_ms(lambda: camera.render(position, orientation))
        figures[f"{name} triangles"] = ray_caster_of(scene).triangle_count
    return figures


def _views_in_process(source: Path) -> dict[str, float]:
    # Each code with its own scenes (config/): the shipped city is part of what is compared.
    environment = dict(os.environ, PYTHONPATH=str(source / "src"), AERIAL_SIM_SHARE=str(source))
    result = subprocess.run([sys.executable, __file__, "--views-json"], env=environment, capture_output=True,
                            text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"measuring {source} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def against(revision: str) -> int:
    """The shipped views with REV's code and with this tree's, alternately, in one run."""
    from _results import record, row

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", revision], capture_output=True,
                            text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "tree"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src", "config"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for round_ in range(2):
            order = [("before", old), ("after", REPO)] if round_ == 0 else [("after", REPO), ("before", old)]
            for label, source in order:
                for key, value in _views_in_process(source).items():
                    best[label][key] = min(best[label].get(key, value), value)
    print(f"colour + depth + segmentation, CPU ms a frame on one core (frames/s); before = {commit}, after = this "
          f"tree; best of 2 alternating rounds of 3 x 10 frames")
    print(f"{'view':<22} {'triangles':>9} {'before':>15} {'after':>15} {'speed-up':>9}")
    rows = []
    for name in SHIPPED_VIEWS:
        for width, height in SIZES:
            key = f"{name} {width}x{height}"
            before, after = best["before"][key], best["after"][key]
            print(f"{key:<22} {int(best['after'][name + ' triangles']):>9} {before:6.1f} ({1e3 / before:5.1f}) "
                  f"{after:6.1f} ({1e3 / after:5.1f}) {before / after:8.2f}x")
            rows.append(row(f"{key}, before ({commit})", round(1e3 / before, 1), "frames/s", f"{before:.1f} ms CPU"))
            rows.append(row(f"{key}, after", round(1e3 / after, 1), "frames/s",
                            f"{after:.1f} ms CPU, {before / after:.2f}x"))
    record("worlds", "Camera frames/s in the shipped scenes, before and after, one core (colour + depth + "
           "segmentation)", rows, f"tools/dev.sh bench worlds --against {commit}",
           notes="CPU time of the rendering thread, best of 2 alternating rounds of 3 x 10 frames each, both codes "
                 "measured in the same minutes. urban as shipped (no sun or shadows); city as shipped (sun, shadows, "
                 "fog, sky, textured terrain). Goal (issue 29): city 640x480 at >= 30 frames/s.")
    return 0


def _big_world_load_json(folder: str, again: bool = False) -> None:
    """Run in a fresh process: the stages of loading ``folder``/big.yaml and rendering its first frame
    (``again``: import, load_scene and the camera only, as a later node or launch does with the scene cache)."""
    marks = [("start", time.perf_counter(), time.process_time())]

    def mark(stage: str) -> None:
        marks.append((stage, time.perf_counter(), time.process_time()))

    from aerial_sim.world.camera import CameraModel, CameraParams
    from aerial_sim.world.ray_caster import ray_caster_of
    from aerial_sim.world.scene import load_scene

    mark("import")
    scene = load_scene(str(Path(folder) / "big.yaml"))
    mark("load_scene")
    camera = CameraModel(CameraParams(), scene)
    mark("camera")
    if again:
        print(json.dumps({stage: (wall - marks[k][1], cpu - marks[k][2]) for k, (stage, wall, cpu) in enumerate(marks[1:])}))
        return
    pose = ((0.0, -60.0, 30.0), (float(np.cos(np.pi / 4)), 0.0, 0.0, float(np.sin(np.pi / 4))))
    camera.render(*pose)
    mark("first frame")
    figures = {stage: (wall - marks[k][1], cpu - marks[k][2]) for k, (stage, wall, cpu) in enumerate(marks[1:])}
    figures["total"] = (marks[-1][1] - marks[0][1], marks[-1][2] - marks[0][2])
    start = (time.perf_counter(), time.process_time())
    ray_caster_of(scene).cast(np.array([0.0, -60.0, 30.0]), np.array([[0.0, 1.0, 0.0]], np.float32))
    figures["first lidar ray (Embree build, unless the first frame built it)"] = (time.perf_counter() - start[0], time.process_time() - start[1])
    figures["frame ms"] = cpu_ms(lambda: camera.render(*pose), 3)
    lod_pixels, camera.lod_pixels = camera.lod_pixels, 0.0
    figures["frame ms, LOD off"] = cpu_ms(lambda: camera.render(*pose), 3)
    camera.lod_pixels = lod_pixels
    figures["triangles"] = ray_caster_of(scene).triangle_count
    print(json.dumps(figures))


def big_world_load(folder: Path) -> dict:
    """Write a 1.3 M-triangle GLB world (lit, shadows on) into ``folder`` and load it in a fresh process."""
    import trimesh

    sphere = trimesh.creation.icosphere(subdivisions=8, radius=20.0)  # 1.3 M triangles
    (folder / "big.glb").write_bytes(trimesh.Scene(sphere).export(file_type="glb"))
    (folder / "big.yaml").write_text("objects:\n  - {name: big, shape: mesh, file: big.glb, position: [0, 0, 30], "
                                     f"segmentation_id: 3}}\nlighting: {LIGHTING_ON}\n")
    # A scene cache of its own (aerial_sim.world.scene_cache), empty: the first process builds it (the scene and
    # the camera's levels of detail), as the first launch does; a second process then loads the world and makes
    # its camera from it, as every later node and launch does.
    env = dict(os.environ, AERIAL_SIM_SCENE_CACHE=str(folder / "scene_cache"))
    figures = {}
    for flag in ("--load-json", "--load-again-json"):
        result = subprocess.run([sys.executable, __file__, flag, str(folder)], capture_output=True, text=True,
                                timeout=1800, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"loading the big world failed:\n{result.stderr[-3000:]}")
        run = json.loads(result.stdout.strip().splitlines()[-1])
        if figures:
            figures["load_scene, from the scene cache"] = run["load_scene"]
            figures["import, from the scene cache"] = run["import"]
            figures["camera, from the scene cache"] = run["camera"]
        else:
            figures = run
    return figures


def lod_worlds(folder: Path) -> list[tuple[str, int, int, float, float, float]]:
    """Frames of large worlds with level of detail on and off: (world, triangles, objects, load + camera s CPU,
    640x480 ms LOD on, ms LOD off), each world in this process (sun and shadows on)."""
    import trimesh

    from aerial_sim.world.camera import CameraModel, CameraParams
    from aerial_sim.world.ray_caster import ray_caster_of
    from aerial_sim.world.scene import load_scene

    ball = trimesh.creation.icosphere(subdivisions=4, radius=3.0)  # 5 120 triangles
    (folder / "ball.glb").write_bytes(trimesh.Scene(ball).export(file_type="glb"))
    rng = np.random.default_rng(29)
    objects = [f"  - {{name: ball_{i}_{j}, shape: mesh, file: ball.glb, position: [{25.0 * i + rng.uniform(-5, 5):.1f}, "
               f"{25.0 * j + rng.uniform(-5, 5):.1f}, 3.0], segmentation_id: 9}}" for i in range(16) for j in range(16)]
    (folder / "balls.yaml").write_text(f"lighting: {LIGHTING_ON}\nobjects:\n" + "\n".join(objects) + "\n")
    if not (folder / "big.glb").exists():
        (folder / "big.glb").write_bytes(trimesh.Scene(trimesh.creation.icosphere(subdivisions=8, radius=20.0))
                                         .export(file_type="glb"))
    (folder / "big_lod.yaml").write_text("objects:\n  - {name: big, shape: mesh, file: big.glb, position: [0, 0, 30], "
                                         f"segmentation_id: 3}}\nlighting: {LIGHTING_ON}\n")
    views = [("256 balls of 5 120 triangles", "balls.yaml", ((-20.0, -20.0, 8.0), YAW_45)),
             ("one 1.3 M-triangle sphere", "big_lod.yaml",
              ((0.0, -60.0, 30.0), (float(np.cos(np.pi / 4)), 0.0, 0.0, float(np.sin(np.pi / 4)))))]
    results = []
    for label, file, pose in views:
        start = time.process_time()
        scene = load_scene(str(folder / file))
        camera = CameraModel(CameraParams(width=640, height=480), scene)
        loaded = time.process_time() - start
        on = cpu_ms(lambda: camera.render(*pose), 3)
        camera.lod_pixels = 0.0
        off = cpu_ms(lambda: camera.render(*pose), 3)
        results.append((label, ray_caster_of(scene).triangle_count, len(scene.objects), loaded, on, off))
    return results


def lod(folder: Path) -> None:
    """Print and record :func:`lod_worlds`."""
    from _results import record, row

    results = lod_worlds(folder)
    print("level of detail: colour + depth + segmentation at 640x480, ms CPU a frame on one core (frames/s)")
    print(f"{'world':<30} {'triangles':>9} {'load+camera s':>13} {'LOD on':>14} {'LOD off':>14} {'speed-up':>8}")
    rows = []
    for label, triangles, _, loaded, on, off in results:
        print(f"{label:<30} {triangles:>9} {loaded:13.1f} {on:6.1f} ({1e3 / on:5.1f}) {off:6.1f} ({1e3 / off:5.1f}) "
              f"{off / on:7.1f}x")
        rows.append(row(f"{label}, LOD on", round(1e3 / on, 1), "frames/s", f"{on:.1f} ms CPU, {off / on:.1f}x"))
        rows.append(row(f"{label}, LOD off", round(1e3 / off, 1), "frames/s", f"{off:.1f} ms CPU"))
        rows.append(row(f"{label}, load + camera (levels made)", round(loaded, 1), "s CPU", f"{triangles} triangles"))
    record("worlds_lod", "Level of detail: frames/s of large worlds at 640x480 with LOD on and off, one core", rows,
           "tools/dev.sh bench worlds --lod",
           notes="CPU time of the rendering thread (frames: best of 3 x 3); sun, shadows and fog on. The balls are "
                 "strewn 25 m apart over 400 x 400 m, seen across from a corner 8 m up; the sphere from 40 m.")


def load_time(folder: Path) -> None:
    """Print and record the load of the 1.3 M-triangle world (:func:`big_world_load`)."""
    from _results import record, row

    load = big_world_load(folder)
    print(f"{load['triangles'] / 1e6:.2f} M-triangle glTF world, in a fresh process (wall s / CPU s of all threads):")
    for stage in ("import", "load_scene", "camera", "first frame", "total", "first lidar ray (Embree build, unless the first frame built it)"):
        print(f"  {stage:<32} {load[stage][0]:6.1f} / {load[stage][1]:6.1f}")
    for stage in ("load_scene", "camera"):
        print(f"  {stage + ', from the scene cache':<32} {load[stage + ', from the scene cache'][0]:6.1f} / "
              f"{load[stage + ', from the scene cache'][1]:6.1f}  (a second process: every later node and launch)")
    print(f"  then {load['frame ms']:.0f} ms CPU a 460x320 frame with LOD ({load['frame ms, LOD off']:.0f} ms with LOD "
          "off; goal: loaded and first frame < 30 s)")
    record("worlds_load", "Loading a 1 M-triangle glTF world (fresh process, sun and shadows on)",
           [row(stage, round(load[stage][1], 1), "s CPU", f"{load[stage][0]:.1f} s wall")
            for stage in ("import", "load_scene", "camera", "first frame", "total", "first lidar ray (Embree build, unless the first frame built it)", "load_scene, from the scene cache", "camera, from the scene cache")]
           + [row("then a 460x320 frame", round(load["frame ms"]), "ms CPU", "level of detail on (the default)"),
              row("then a 460x320 frame, LOD off", round(load["frame ms, LOD off"]), "ms CPU", "every triangle drawn")],
           "tools/dev.sh bench worlds --load",
           notes=f"{load['triangles']} triangles (an icosphere exported as GLB). 'camera' includes making the mesh's "
                 "simplified levels (level of detail), read from the scene cache's .lod file in the second process. CPU time counts every thread of the process, so it stays "
                 "meaningful on a loaded machine; goal (issue 29): < 30 s to load.")


def main(argv: list[str]) -> int:
    if "--load-json" in argv:
        _big_world_load_json(argv[argv.index("--load-json") + 1])
        return 0
    if "--load-again-json" in argv:
        _big_world_load_json(argv[argv.index("--load-again-json") + 1], again=True)
        return 0
    if "--views-json" in argv:
        print(json.dumps(shipped_views_ms()))
        return 0
    if "--against" in argv:
        return against(argv[argv.index("--against") + 1])
    if "--load" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            load_time(Path(tmp))
        return 0
    if "--lod" in argv:
        with tempfile.TemporaryDirectory() as tmp:
            lod(Path(tmp))
        return 0
    from _results import record, row

    from aerial_sim.world.camera import CameraModel, CameraParams
    from aerial_sim.world.ray_caster import ray_caster_of
    from aerial_sim.world.scene import load_scene

    sizes = SIZES
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

        load_time(folder)
        lod(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
