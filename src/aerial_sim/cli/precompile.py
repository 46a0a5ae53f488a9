"""``aerial_sim precompile``: compile every numba kernel once, so no node pays for it at start.

numba compiles a kernel the first time a process calls it and keeps the machine code in the
source tree's ``__pycache__`` (``cache=True``). A fresh clone or install has no such cache: the
first fleet launch's physics node then spends 15-80 s compiling the batched physics kernels on a
2-core machine before its first message, and the first camera node its rasteriser, while the
launch looks hung. ``tools/dev.sh`` runs this once per change of the kernel sources; a user
of a pip install may run it once after installing. Later runs load the cache in about a second.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import multiprocessing
import os
import time


def compile_batched_physics() -> None:
    """Step two hovering quads on the batched path: broad phase, pair test and free flight kernels."""
    from aerial_sim.physics.world import warm_batched_path

    warm_batched_path()


def compile_camera() -> None:
    """The camera's rasteriser, shading and shadow kernels and the ray caster's hit merge; the shading in each
    of its four versions (with and without glTF normal/occlusion/emissive maps, with and without textures on
    TEXCOORD_1) and the maps' per-pixel loop, which a scene with such textures would otherwise compile at
    its camera's start (about 20 s on 2 cores)."""
    import numpy as np

    from aerial_sim.world import material_maps, raster_kernels, render_kernels, shadow_kernels

    raster_kernels.warm_up()
    render_kernels.warm_up(shading=True)
    render_kernels.warm_up(shading=True, uv_sets=True)
    material_maps.warm_up(uv_sets=False)
    material_maps.warm_up(uv_sets=True)
    shadow_kernels.warm_up()
    shadow_kernels.build_bvh(np.array([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]))  # a scene's first rasteriser


def compile_swarm_flight() -> None:
    """The batched flight controller and IMU of a swarm flight (SwarmFlight, ``tools/dev.sh bench swarm``) and the
    batched physics' contact prefilter and array interface."""
    from aerial_sim.control.swarm_flight import warm_up

    warm_up()


#: Kernel groups in the order they compile. The groups share no kernel, so on a machine with two cores or more
#: each compiles in its own process, side by side (compiling is single-threaded): the camera's kernels beside
#: the physics' and the swarm flight's (which also runs the batched physics: those two stay one group).
GROUPS = ({"batched physics": compile_batched_physics, "swarm flight": compile_swarm_flight},
          {"camera": compile_camera})


def compile_group(group: dict) -> list[str]:
    """Compile ``group``'s kernels in order; one line per kernel set, with its seconds."""
    lines = []
    for name, compile_kernels in group.items():
        started = time.perf_counter()
        compile_kernels()
        lines.append(f"[aerial_sim] {name} kernels ready in {time.perf_counter() - started:.1f} s")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aerial_sim precompile", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    if importlib.util.find_spec("numba") is None:
        print("[aerial_sim] numba is not installed: nothing to compile (the NumPy reference paths run)")
        return 0
    if (os.cpu_count() or 1) < 2:
        for group in GROUPS:
            print("\n".join(compile_group(group)), flush=True)
        return 0
    with concurrent.futures.ProcessPoolExecutor(len(GROUPS), mp_context=multiprocessing.get_context("spawn")) as pool:
        for done in concurrent.futures.as_completed([pool.submit(compile_group, group) for group in GROUPS]):
            print("\n".join(done.result()), flush=True)
    return 0
