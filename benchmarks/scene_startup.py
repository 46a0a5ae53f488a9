"""CPU time a node spends turning a loaded scene into what it keeps (issue 29: the city graph's start-up).

    tools/dev.sh bench scene_startup [--scene city] [--rounds 3] [--checkout DIR]
    tools/dev.sh bench scene_startup --concurrent 5 [--no-cache]   # N processes load it at once
    tools/dev.sh bench scene_startup --nodes [--checkout DIR]      # the scene markers and camera nodes' start

Each round, in a fresh process: ``load_scene`` (every node that takes ``scene`` pays it), then the physics
node's colliders (``scene_colliders``: one FCL convex hull per mesh object) and the scene markers node's
message (``scene_primitives`` + ``encode_marker_array``), CPU seconds of the process
(``time.process_time``), then the camera's draw tables (``render_surfaces`` + ``closed_rows``), and a digest of the
marker bytes, the draw tables and the colliders' contacts at seeded probe poses (so before and after are seen to
answer the same). With ``--checkout DIR`` (another checkout's
tree, e.g. ``git archive`` of an older commit) the rounds alternate between DIR's code and this one's,
so both share the machine's load. Prints the best round of each; records this checkout's in
doc/results/scene_startup.json.

The rounds share a scene cache folder made empty for this run (:mod:`aerial_sim.world.scene_cache`), so this
checkout's first round builds the cache (what the first node of the first launch pays) and the later rounds
read it (every other node, every later launch): both are printed and recorded, for ``load_scene``, the
colliders (their per-file hulls: the ``.hulls`` file), the markers (``.markers``) and the camera's draw tables
(``.surfaces`` and ``.draw``). ``--no-cache`` turns it off. With ``--checkout`` each tree
has a cache folder of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import record, row

REPO = Path(__file__).resolve().parents[1]

PROBE = r"""
import hashlib, json, sys, time
import numpy as np
from aerial_sim.world.scene import load_scene
from aerial_sim.world.colliders import scene_colliders
from aerial_sim.viewer.scene_view import scene_primitives
from aerial_sim.viewer.marker_array import encode_marker_array
from aerial_sim.world.closed_surfaces import closed_rows
from aerial_sim.world.surface_tables import render_surfaces
try:
    from aerial_sim.viewer.marker_array import scene_marker_array  # the node's call since the .markers file
except ImportError:
    def scene_marker_array(scene, frame_id, alpha, ground_size_m):
        primitives = scene_primitives(scene, ground_size_m)
        return encode_marker_array(primitives, frame_id, alpha), len(primitives)
t0 = time.process_time(); scene = load_scene(sys.argv[1]); t1 = time.process_time()
colliders = scene_colliders(scene); t2 = time.process_time()
markers = bytes(scene_marker_array(scene, "map", 1.0, 120.0)[0]); t3 = time.process_time()
(surfaces, lod), closed = render_surfaces(scene), closed_rows(scene); t4 = time.process_time()
tables = hashlib.sha256(closed.tobytes())
for table in (surfaces, surfaces.maps):
    for name in ("triangles", "surface", "uv", "texture", "albedo", "texels", "texture_table", "pbr", "pbr_texture",
                 "uv1", "uv_sets", "normal_texture", "normal_scale", "occlusion_texture", "occlusion_strength",
                 "emissive", "emissive_texture", "tangents"):
        value = getattr(table, name, None)
        tables.update(name.encode() + (b"-" if value is None else value.tobytes()))
for value in (lod.group, lod.level, lod.lift) if lod is not None else ():
    tables.update(value.tobytes())
rng, contacts = np.random.default_rng(0), hashlib.sha256()
for collider in colliders:
    if type(collider).__name__ != "FclCollider":
        continue
    low, high = np.array(collider.bounds)
    contacts.update(repr(collider.bounds).encode())
    for _ in range(4):
        q = rng.normal(size=4)
        c = collider.contact(tuple(low + (high - low) * rng.uniform(-0.1, 1.1, 3)), tuple(q / np.linalg.norm(q)),
                             (0.3, 0.3, 0.1))
        contacts.update(repr(None if c is None else (c.point, c.normal, c.depth_m, c.patch_radius_m)).encode())
print(json.dumps({"load_scene": t1 - t0, "colliders": t2 - t1, "markers": t3 - t2, "draw_tables": t4 - t3,
                  "n_colliders": len(colliders), "marker_bytes": len(markers), "rows": surfaces.count,
                  "markers_sha": hashlib.sha256(markers).hexdigest()[:16], "contacts_sha": contacts.hexdigest()[:16],
                  "tables_sha": tables.hexdigest()[:16]}))
"""


CONCURRENT_PROBE = r"""
import json, sys, time
from aerial_sim.world.scene import load_scene
t0, w0 = time.process_time(), time.perf_counter(); scene = load_scene(sys.argv[1])
print(json.dumps({"load_scene": time.process_time() - t0, "wall": time.perf_counter() - w0,
                  "cache": scene.cache.get("scene_cache", ("off",))[0]}))
"""


def concurrent(scene: str, count: int, cache: str) -> None:
    """``count`` processes load ``scene`` at once into an empty cache, as the nodes of a first launch do."""
    env = dict(os.environ, AERIAL_SIM_SHARE=str(REPO), PYTHONPATH=str(REPO / "src"), AERIAL_SIM_SCENE_CACHE=cache)
    runs = [subprocess.Popen([sys.executable, "-c", CONCURRENT_PROBE, scene], env=env, stdout=subprocess.PIPE,
                             text=True) for _ in range(count)]
    results = [json.loads(run.communicate()[0].strip().splitlines()[-1]) for run in runs]
    for result in results:
        print(f"  {result['cache']:>5}: load_scene {result['load_scene']:.2f} CPU s, {result['wall']:.2f} s wall")
    print(f"{count} processes at once ({scene}, cache {'off' if cache == 'off' else 'empty'}): load_scene "
          f"{sum(r['load_scene'] for r in results):.2f} CPU s in all, load {os.getloadavg()[0]:.1f}")


#: The node processes whose start a scene's cache shortens, and the line each logs once it is set up.
NODES = {"scene_markers": "markers on /scene_markers", "camera": "renderer warmed up in"}


def node_start(checkout: Path, executable: str, scene: str, cache: str, timeout_s: float = 300.0) -> float:
    """CPU s (utime + stime from /proc) of the node process ``executable`` from its start to its set-up line."""
    import signal
    import time

    env = dict(os.environ, AERIAL_SIM_SHARE=str(REPO), PYTHONPATH=str(checkout / "src"), AERIAL_SIM_SCENE_CACHE=cache,
               PYTHONUNBUFFERED="1")
    process = subprocess.Popen([sys.executable, "-m", f"aerial_sim.nodes.{executable}", "--ros-args", "-p",
                                f"scene:={scene}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline, lines = time.monotonic() + timeout_s, []
    try:
        for line in process.stdout:
            lines.append(line)
            if NODES[executable] in line:
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            if time.monotonic() > deadline:
                break
        raise SystemExit(f"{executable} did not log {NODES[executable]!r}:\n{''.join(lines[-20:])}")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def nodes(scene: str, rounds: int, checkout: Path | None) -> None:
    """Each node's start, CPU s from its process's start to its set-up line: the first with an empty scene
    cache folder (what the first launch pays), then from the cache it left (every later launch)."""
    trees = ([("before", checkout.resolve())] if checkout else []) + [("this", REPO)]
    best: dict[tuple[str, str, str], float] = {}
    for _ in range(rounds):
        for label, tree in trees:
            for executable in NODES:
                with tempfile.TemporaryDirectory(prefix="scene_cache_nodes_") as folder:
                    for state in ("empty cache", "from the cache"):
                        cpu = node_start(tree, executable, scene, folder)
                        best[label, executable, state] = min(cpu, best.get((label, executable, state), cpu))
                        print(f"{label} {executable} ({state}): {cpu:.2f} CPU s  load {os.getloadavg()[0]:.1f}",
                              flush=True)
    for executable in NODES:
        for state in ("empty cache", "from the cache"):
            print(f"{executable} node start, {scene}, {state} (best of {rounds}): " + "  ->  ".join(
                f"{label} {best[label, executable, state]:.2f}" for label, _ in trees) + " CPU s")


def one_round(checkout: Path, scene: str, cache: str) -> dict:
    env = dict(os.environ, AERIAL_SIM_SHARE=str(REPO), PYTHONPATH=str(checkout / "src"), AERIAL_SIM_SCENE_CACHE=cache)
    out = subprocess.run([sys.executable, "-c", PROBE, scene], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="city")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkout", type=Path, help="another checkout's tree, alternated with this one")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--no-cache", action="store_true", help="load every scene from its files")
    parser.add_argument("--concurrent", type=int, default=0, help="only: N processes load the scene at once")
    parser.add_argument("--nodes", action="store_true", help="only: the scene markers and camera node processes' "
                        "start, empty cache and from the cache (ROS_DOMAIN_ID: the domain they start in)")
    args = parser.parse_args()
    if args.nodes:
        nodes(args.scene, args.rounds, args.checkout)
        return
    folder = tempfile.TemporaryDirectory(prefix="scene_cache_bench_")
    cache = "off" if args.no_cache else folder.name
    if args.concurrent:
        concurrent(args.scene, args.concurrent, cache)
        return
    trees = ([("before", args.checkout.resolve())] if args.checkout else []) + [("this", REPO)]
    results: dict[str, list[dict]] = {label: [] for label, _ in trees}
    for _ in range(args.rounds):
        for label, tree in trees:
            # each tree its own cache folder: two codes' files of one scene would replace each other
            results[label].append(one_round(tree, args.scene, cache if args.no_cache else f"{cache}/{label}"))
            print(f"{label}: {results[label][-1]}  load {os.getloadavg()[0]:.1f}", flush=True)
    steps = ("load_scene", "colliders", "markers", "draw_tables")
    for label, runs in results.items():
        best = {key: min(run[key] for run in runs) for key in steps}
        print(f"{label} ({args.scene}, best of {len(runs)}): load_scene {best['load_scene']:.2f} s, colliders "
              f"{best['colliders']:.2f} s ({runs[0]['n_colliders']}), markers {best['markers']:.2f} s "
              f"({runs[0]['marker_bytes']} bytes, sha {runs[0]['markers_sha']}), camera's draw tables "
              f"{best['draw_tables']:.2f} s ({runs[0]['rows']} rows, sha {runs[0]['tables_sha']}), contacts sha "
              f"{runs[0]['contacts_sha']}")
    runs = results["this"]
    warm = {key: min(r[key] for r in runs[1:]) if len(runs) > 1 else float("nan") for key in steps}
    print("this, first round (builds the cache) -> best later round (from the cache): " + ", ".join(
        f"{key} {runs[0][key]:.2f} -> {warm[key]:.2f} s" for key in steps))
    if args.no_record:
        return
    later = [("colliders", "physics colliders (scene_colliders)", f"{runs[0]['n_colliders']} colliders"),
             ("markers", "scene markers (scene_marker_array)", f"{runs[0]['marker_bytes']} bytes"),
             ("draw_tables", "camera's draw tables (render_surfaces + closed_rows)", f"{runs[0]['rows']} rows")]
    record("scene_startup", f"CPU s to build the {args.scene} scene's colliders and markers", [
        row("load_scene, first load (builds the scene cache)" if not args.no_cache else "load_scene (no cache)",
            round(runs[0]["load_scene"], 2), "CPU s"),
        *([row("load_scene, later loads (from the scene cache)", round(warm["load_scene"], 2), "CPU s",
               "every node after the first, every later launch")] if not args.no_cache and len(runs) > 1 else []),
        *[row(what + (", first round (builds its cache)" if not args.no_cache else ""), round(runs[0][key], 2),
              "CPU s", note) for key, what, note in later],
        *[row(what + ", later rounds (from the scene cache)", round(warm[key], 2), "CPU s", "every later launch")
          for key, what, _ in later if not args.no_cache and len(runs) > 1],
    ], command=f"tools/dev.sh bench scene_startup --scene {args.scene}")


if __name__ == "__main__":
    main()
