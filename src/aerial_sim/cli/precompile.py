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
    from aerial_sim.world import material_maps, raster_kernels, render_kernels, shadow_kernels

    raster_kernels.warm_up()
    render_kernels.warm_up(shading=True)
    render_kernels.warm_up(shading=True, uv_sets=True)
    material_maps.warm_up(uv_sets=False)
    material_maps.warm_up(uv_sets=True)
    shadow_kernels.warm_up()


KERNELS = {"batched physics": compile_batched_physics, "camera": compile_camera}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aerial_sim precompile", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    from aerial_sim.jit import COMPILED

    if not COMPILED:
        print("[aerial_sim] numba is not installed: nothing to compile (the NumPy reference paths run)")
        return 0
    for name, compile_kernels in KERNELS.items():
        started = time.perf_counter()
        compile_kernels()
        print(f"[aerial_sim] {name} kernels ready in {time.perf_counter() - started:.1f} s", flush=True)
    return 0
