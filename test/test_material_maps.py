"""glTF normal, occlusion and emissive maps (glTF 2.0 sec. 3.9.3-3.9.5): loaded with the asset, shaded by the
camera as the spec says, in the compiled kernel and the NumPy reference alike; a texture that cannot be read is
one error naming the file."""

from __future__ import annotations

import base64
import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
import trimesh
from PIL import Image

from aerial_sim.config import ParamsError
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.scene import load_scene

LEVEL = (1.0, 0.0, 0.0, 0.0)
#: A 65 x 65 camera looking straight down: pixel (32, 32) sees the point right below it.
DOWN = dict(width=65, height=65, hfov_deg=60.0, mount_position_m=(0.0, 0.0, 0.0), mount_rpy_deg=(0.0, 90.0, 0.0))
UNIT_QUAD = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])  # in the scene's x-y, facing +z


def write_gltf(folder, corners, material: dict, edit=None, uv=None) -> str:
    """A two-triangle quad with scene-frame ``corners`` (4, 3), uv (0, 0) at corner 0 to (1, 1) at corner 2, as a
    .gltf in its own folder (glTF is +Y up: scene (x, y, z) is glTF (x, z, -y)); ``edit(material_json)`` adds
    what trimesh does not write (scales, strengths, extensions). Returns the file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    corners = np.asarray(corners, float)
    vertices = np.stack([corners[:, 0], corners[:, 2], -corners[:, 1]], axis=1)
    uv = (UNIT_QUAD + 1.0) / 2.0 if uv is None else np.asarray(uv, float)
    mesh = trimesh.Trimesh(vertices, [[0, 1, 2], [0, 2, 3]], process=False,
                           visual=trimesh.visual.TextureVisuals(uv=uv, material=trimesh.visual.material.PBRMaterial(
                               name="m", baseColorFactor=[200, 180, 160, 255], metallicFactor=0.0, roughnessFactor=1.0,
                               **material)))
    files = trimesh.Scene(mesh).export(file_type="gltf")
    document = json.loads(files.pop("model.gltf"))
    if edit is not None:
        edit(document["materials"][0])
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "quad.gltf").write_text(json.dumps(document))
    return str(folder / "quad.gltf")


def flat(center, size: float = 1.0) -> np.ndarray:
    return np.column_stack([UNIT_QUAD * size, np.zeros(4)]) + np.asarray(center, float)


def solid(rgb) -> Image.Image:
    return Image.fromarray(np.full((4, 4, 3), rgb, np.uint8))


def scene_of(tmp_path, objects: list[tuple[str, str, tuple]], lighting: str = "{}"):
    lines = [f"lighting: {lighting}", "objects:"] + [
        f"  - {{name: {name}, shape: mesh, file: {path}, position: {list(position)}, segmentation_id: 7}}"
        for name, path, position in objects]
    (tmp_path / "world.yaml").write_text("\n".join(lines) + "\n")
    return load_scene(str(tmp_path / "world.yaml"))


def lit_from_above(tmp_path, objects: list[tuple[str, str, tuple]], size: tuple[int, int, float]):
    """The objects under a slab at 8 m, with shadows, seen straight down from 4 m by a camera of (width, height,
    hfov_deg) with ambient 0.3 and a high sun: the camera, its pose and its colour image (int), after checking
    that the compiled kernel and the NumPy reference render it alike (to 1 level)."""
    slab = "  - {name: slab, shape: box, size: [30, 30, 0.5], position: [0, 0, 8], segmentation_id: 9}\n"
    scene_of(tmp_path, objects, lighting="{shadows: true}")
    (tmp_path / "world.yaml").write_text((tmp_path / "world.yaml").read_text() + slab)
    width, height, hfov_deg = size
    params = CameraParams(**(DOWN | dict(width=width, height=height, hfov_deg=hfov_deg)), ambient=0.3,
                          sun_direction_enu=(0.2, 0.1, 1.0))
    camera = CameraModel(params, load_scene(str(tmp_path / "world.yaml")))
    pose = ((0.0, 0.0, 4.0), LEVEL)
    frames = [camera.render(*pose, reference=r).color.astype(int) for r in (False, True)]
    assert np.abs(frames[0] - frames[1]).max() <= 1  # kernel and reference agree
    return camera, pose, frames[0]


@pytest.mark.parametrize("texel, sun", [
    ((191, 128, 238), (1.0, 0.0, 1.0)),  # tangent space (0.498, 0.004, 0.867): 30 deg toward +u; x 1.5: 41 deg
    ((128, 191, 238), (0.0, 1.0, 1.0)),  # toward +v, the map's +Y ("up" in the image)
])
def test_a_normal_map_tilts_the_shading_as_a_tilted_quad_would(tmp_path, texel, sun):
    """A flat quad whose normal map holds n_t = (2 RGB / 255 - 1) x (s, s, 1), s its scale 1.5, shades as a quad
    geometrically turned to the normal the spec makes of it, normalize(n_t) in the frame (T = +u = east,
    B = +v = north, N = up); without the map it shades as a flat quad, visibly darker under a sun on the side
    the map tilts it to."""
    scale = 1.5
    n_t = (2.0 * np.array(texel) / 255.0 - 1.0) * (scale, scale, 1.0)
    n = n_t / np.linalg.norm(n_t)  # world: T = x, B = y, N = z
    tangent = np.array([1.0, 0.0, 0.0]) - n * n[0]  # the tilted quad's own u direction, in its plane
    tangent /= np.linalg.norm(tangent)
    bitangent = np.cross(n, tangent)
    tilted_corners = np.array([c[0] * tangent + c[1] * bitangent for c in UNIT_QUAD])
    quads = {
        "mapped": write_gltf(tmp_path / "mapped", flat((0, 0, 0)), dict(normalTexture=solid(texel)),
                             lambda m: m["normalTexture"].update(scale=scale)),
        "tilted": write_gltf(tmp_path / "tilted", tilted_corners, {}),
        "flat": write_gltf(tmp_path / "flat", flat((0, 0, 0)), {}),
    }
    colours = {}
    for name, path in quads.items():
        scene = scene_of(tmp_path, [("quad", path, (0.0, 0.0, 1.0))])
        camera = CameraModel(CameraParams(**DOWN, ambient=0.2, sun_direction_enu=sun), scene)
        frames = [camera.render((0.0, 0.0, 4.0), LEVEL, reference=r).color.astype(int) for r in (False, True)]
        assert np.abs(frames[0] - frames[1]).max() <= 1, name  # kernel and reference agree
        colours[name] = frames[0][32, 32]
    assert np.abs(colours["mapped"] - colours["tilted"]).max() <= 1, colours
    assert (colours["mapped"] - colours["flat"]).min() > 15, colours  # the map turned it toward the sun


def test_an_emissive_quad_is_lit_in_shadow_and_occlusion_dims_only_the_ambient_light(tmp_path):
    """Under a slab that hides the sun, a plain quad shows its ambient light a x c; an emissive one adds
    emissiveFactor x 255 x emissiveStrength (KHR_materials_emissive_strength) times its emissive texture (white
    on the west half, black on the east: no emission there); an occluded one (texel R 64, strength 0.5) shows
    a x c x (1 + 0.5 (64 / 255 - 1))."""
    halves = np.zeros((4, 4, 3), np.uint8)
    halves[:, :2] = 255
    emissive = write_gltf(tmp_path / "emissive", flat((0, 0, 0), 0.6),
                          dict(emissiveFactor=[0.4, 0.2, 0.0], emissiveTexture=Image.fromarray(halves)),
                          lambda m: m.update(extensions={"KHR_materials_emissive_strength": {"emissiveStrength": 1.5}}))
    occluded = write_gltf(tmp_path / "occluded", flat((0, 0, 0), 0.6), dict(occlusionTexture=solid((64, 64, 64))),
                          lambda m: m["occlusionTexture"].update(strength=0.5))
    plain = write_gltf(tmp_path / "plain", flat((0, 0, 0), 0.6), {})
    objects = [("plain", plain, (0.0, 1.5, 1.0)), ("glow", emissive, (0.0, 0.0, 1.0)),
               ("dim", occluded, (0.0, -1.5, 1.0))]
    camera, pose, image = lit_from_above(tmp_path, objects, (121, 41, 90.0))
    ambient = 0.3 * np.array([200.0, 180.0, 160.0])

    def at(x: float, y: float = 0.0):
        col, row = np.round(camera.project(np.array([x, y, 1.0]), *pose)[0]).astype(int)
        return image[row, col]

    assert np.abs(at(0.0, 1.5) - ambient).max() <= 1  # in shadow: ambient light only
    glow = np.array([0.4, 0.2, 0.0]) * 255.0 * 1.5
    assert np.abs(at(-0.3) - (ambient + glow)).max() <= 1  # the white (west) half of the emissive texture
    assert np.abs(at(0.3) - ambient).max() <= 1  # the black half emits nothing
    assert np.abs(at(0.0, -1.5) - ambient * (1.0 + 0.5 * (64 / 255 - 1.0))).max() <= 1


def test_a_missing_or_broken_map_texture_is_one_error_naming_the_file(tmp_path):
    path = write_gltf(tmp_path / "broken", flat((0, 0, 0)), dict(normalTexture=solid((128, 128, 255))))
    document = json.loads(open(path).read())
    document["images"] = [{"uri": "bumps.png"}]
    with open(path, "w") as file:
        json.dump(document, file)
    with pytest.raises(ParamsError, match=r"quad\.gltf: texture not found: .*bumps\.png"):
        scene_of(tmp_path, [("quad", path, (0, 0, 1))])
    (tmp_path / "broken" / "bumps.png").write_bytes(b"not a png at all")
    with pytest.raises(ParamsError, match=r"quad\.gltf: material 'm' normalTexture: image bumps\.png cannot be read"):
        scene_of(tmp_path, [("quad", path, (0, 0, 1))])


def test_a_scene_without_maps_has_no_map_table():
    from aerial_sim.world.surface_tables import scene_surfaces

    assert scene_surfaces(load_scene("urban")).maps is None  # its frames cost nothing more


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["normalTexture"].update(scale="steep"), r"quad\.gltf: material 'm' normalTexture\.scale: must be a "
                                                         r"finite number"),
    (lambda m: m.update(occlusionTexture={"index": 0, "strength": 2.0}),
     r"quad\.gltf: material 'm' occlusionTexture\.strength: must be a finite number in \[0, 1\], got 2\.0"),
    (lambda m: m.update(emissiveFactor=[1.0, 0.5]), r"cannot read mesh .*quad\.gltf"),  # trimesh's own refusal
    (lambda m: m.update(extensions={"KHR_materials_emissive_strength": {"emissiveStrength": -1}}),
     r"quad\.gltf: material 'm' KHR_materials_emissive_strength\.emissiveStrength: must be a finite number in "
     r"\[0, inf\], got -1"),
])
def test_a_bad_map_factor_is_one_error_naming_the_file_material_and_key(tmp_path, edit, message):
    path = write_gltf(tmp_path / "bad", flat((0, 0, 0)), dict(normalTexture=solid((128, 128, 255))), edit)
    with pytest.raises(ParamsError, match=message):
        scene_of(tmp_path, [("quad", path, (0, 0, 1))])


def add_attribute(path: str, name: str, values, edit=None) -> None:
    """Give the quad's primitive in ``path`` the vertex attribute ``name`` (float32 rows, one per vertex in the
    file's order: its four corners), as a buffer of its own; ``edit(material_json)`` changes the material too."""
    document = json.loads(open(path).read())
    values = np.asarray(values, np.float32)
    data = values.tobytes()
    document["buffers"].append({"byteLength": len(data),
                                "uri": "data:application/octet-stream;base64," + base64.b64encode(data).decode()})
    document["bufferViews"].append({"buffer": len(document["buffers"]) - 1, "byteOffset": 0, "byteLength": len(data)})
    width = values.shape[1]
    document["accessors"].append({"bufferView": len(document["bufferViews"]) - 1, "componentType": 5126,
                                  "count": len(values), "type": f"VEC{width}"})
    document["meshes"][0]["primitives"][0]["attributes"][name] = len(document["accessors"]) - 1
    if edit is not None:
        edit(document["materials"][0])
    with open(path, "w") as file:
        json.dump(document, file)


def scene_vector_in_gltf(v) -> list[float]:
    """A scene-frame direction in glTF's +Y-up frame (scene (x, y, z) is glTF (x, z, -y))."""
    return [v[0], v[2], -v[1]]


@pytest.mark.parametrize("texel, tangent, w, sun", [
    ((191, 128, 238), (0.0, 1.0, 0.0), 1.0, (0.0, 1.0, 1.0)),  # toward +T, the file's tangent: north, not east
    ((128, 191, 238), (1.0, 0.0, 0.0), -1.0, (0.0, -1.0, 1.0)),  # toward +B = w (N x T) = -(z x x): south
])
def test_a_normal_map_with_the_files_tangents_tilts_the_shading_the_way_its_frame_says(tmp_path, texel, tangent, w,
                                                                                      sun):
    """A flat quad with a normal map and a TANGENT attribute shades as a quad geometrically turned to
    normalize(n_t) in the file's frame (T its tangent, B = w (N x T), N up; glTF 2.0 sec. 3.7.2.1), not in the
    frame of its texture coordinates (T = +u = east, B = +v = north), which would tilt it the other way or
    sideways; brighter than the flat quad under a sun on the side the file's frame tilts it to."""
    scale = 1.5
    n_t = (2.0 * np.array(texel) / 255.0 - 1.0) * (scale, scale, 1.0)
    n_t /= np.linalg.norm(n_t)
    t_world, normal = np.array(tangent), np.array([0.0, 0.0, 1.0])
    n = n_t[0] * t_world + n_t[1] * w * np.cross(normal, t_world) + n_t[2] * normal
    along = np.array([1.0, 0.0, 0.0]) - n * n[0]
    along /= np.linalg.norm(along)
    tilted_corners = np.array([c[0] * along + c[1] * np.cross(n, along) for c in UNIT_QUAD])
    mapped = write_gltf(tmp_path / "mapped", flat((0, 0, 0)), dict(normalTexture=solid(texel)),
                        lambda m: m["normalTexture"].update(scale=scale))
    add_attribute(mapped, "TANGENT", [scene_vector_in_gltf(tangent) + [w]] * 4)
    quads = {"mapped": mapped, "tilted": write_gltf(tmp_path / "tilted", tilted_corners, {}),
             "flat": write_gltf(tmp_path / "flat", flat((0, 0, 0)), {})}
    colours = {}
    for name, path in quads.items():
        scene = scene_of(tmp_path, [("quad", path, (0.0, 0.0, 1.0))])
        camera = CameraModel(CameraParams(**DOWN, ambient=0.2, sun_direction_enu=sun), scene)
        frames = [camera.render((0.0, 0.0, 4.0), LEVEL, reference=r).color.astype(int) for r in (False, True)]
        assert np.abs(frames[0] - frames[1]).max() <= 1, name  # kernel and reference agree
        colours[name] = frames[0][32, 32]
    assert np.abs(colours["mapped"] - colours["tilted"]).max() <= 1, colours
    assert (colours["mapped"] - colours["flat"]).min() > 15, colours  # the file's frame turned it toward the sun


#: Texture coordinates mapped unevenly over the quad's two triangles (corner 2 at (1, 0.5), not (1, 1)): the
#: direction of increasing u is east on triangle (0, 1, 2) and 26.6 deg north of east on (0, 2, 3).
UNEVEN_UV = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.5], [0.0, 1.0]])


def mikktspace_quad_tangents(corners: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """The quad's vertex tangents (4, 3) by MikkTSpace's definition, written out for two coplanar triangles
    (0, 1, 2) and (0, 2, 3) (Mikkelsen 2008; what Blender's glTF exporter writes as TANGENT): each face's unit
    dP/du, summed at each vertex weighted by the face's angle there, unit."""
    sums = np.zeros((4, 3))
    for face in ((0, 1, 2), (0, 2, 3)):
        p, t = corners[list(face)], uv[list(face)]
        e1, e2, (du1, dv1), (du2, dv2) = p[1] - p[0], p[2] - p[0], t[1] - t[0], t[2] - t[0]
        tangent = (dv2 * e1 - dv1 * e2) / (du1 * dv2 - du2 * dv1)
        tangent /= np.linalg.norm(tangent)
        for k in range(3):
            a, b = p[(k + 1) % 3] - p[k], p[(k + 2) % 3] - p[k]
            sums[face[k]] += math.acos(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) * tangent
    return sums / np.linalg.norm(sums, axis=1, keepdims=True)


def render_quad(tmp_path, path: str):
    """The quad at z = 1 seen straight down from 4 m, a sun low in the south-east (the shading depends on which
    way the tangent points): the colour images (int) of the compiled kernel and of the NumPy reference."""
    scene = scene_of(tmp_path, [("quad", path, (0.0, 0.0, 1.0))])
    camera = CameraModel(CameraParams(**DOWN, ambient=0.2, sun_direction_enu=(0.3, -1.0, 1.0)), scene)
    return [camera.render((0.0, 0.0, 4.0), LEVEL, reference=r).color.astype(int) for r in (False, True)]


def test_a_normal_map_without_tangents_shades_as_with_the_mikktspace_tangents_interpolated_per_pixel(tmp_path):
    """glTF 2.0 sec. 3.7.2.1: a primitive with a normal map and no TANGENT gets MikkTSpace tangents. A quad whose
    texture is mapped unevenly (its two triangles' u directions 26.6 deg apart) and whose normal map tilts 45 deg
    toward +T shades the same without TANGENT as with the MikkTSpace tangents written in the file (to 1 level,
    everywhere), and, as a shader interpolating the vertex tangents does, without a crease along the diagonal
    the triangles share: across it the colour changes by at most a few levels a pixel, though it changes by
    over 15 levels over the quad (per-face tangents crease there: 12 levels in one pixel)."""
    corners, texel = flat((0, 0, 0)), (218, 128, 218)
    computed = write_gltf(tmp_path / "computed", corners, dict(normalTexture=solid(texel)), uv=UNEVEN_UV)
    given = write_gltf(tmp_path / "given", corners, dict(normalTexture=solid(texel)), uv=UNEVEN_UV)
    add_attribute(given, "TANGENT", [scene_vector_in_gltf(t) + [1.0] for t in mikktspace_quad_tangents(corners, UNEVEN_UV)])
    rendered = {name: render_quad(tmp_path, path) for name, path in (("computed", computed), ("given", given))}
    images = {name: kernel for name, (kernel, _) in rendered.items()}
    quad = np.s_[20:45, 20:45]  # inside the quad (+-1 m at 3 m: +-19 px)
    assert np.abs(images["computed"][quad] - images["given"][quad]).max() <= 1
    for row in images["computed"][quad]:  # every row crosses the diagonal
        assert np.abs(np.diff(row, axis=0)).max() <= 4, row[:, 0]
    red = images["computed"][quad][:, :, 0]
    assert red.max() - red.min() > 15, (red.min(), red.max())
    for kernel, reference in rendered.values():
        assert np.abs(kernel - reference).max() <= 1  # the compiled kernel and the NumPy reference agree


def test_maps_on_texcoord_1_are_sampled_where_the_second_uv_set_points(tmp_path):
    """TEXCOORD_1 mirrors TEXCOORD_0 east-west. An occlusion map (dark west half, R 64, strength 0.5) and a base
    colour texture (red west half, blue east) that name texCoord 1 show their west halves on the quad's east
    half: in shadow the occluded quad is a x c x (1 + 0.5 (64 / 255 - 1)) in the east, a x c in the west, and
    the textured quad red in the east, blue in the west."""
    dark_west = np.full((4, 4, 3), 255, np.uint8)
    dark_west[:, :2] = 64
    red_west = np.zeros((4, 4, 3), np.uint8)
    red_west[:, :2, 0] = 255
    red_west[:, 2:, 2] = 255
    mirrored = [[1.0 - u, v] for u, v in (UNIT_QUAD + 1.0) / 2.0]  # trimesh's (v up) uv of write_gltf's corners, u
    # mirrored; the file's TEXCOORD_1 is glTF's (v down): 1 - v
    occluded = write_gltf(tmp_path / "occluded", flat((0, 0, 0), 0.6), dict(occlusionTexture=Image.fromarray(dark_west)))
    textured = write_gltf(tmp_path / "textured", flat((0, 0, 0), 0.6), dict(baseColorTexture=Image.fromarray(red_west)))
    add_attribute(occluded, "TEXCOORD_1", [[u, 1.0 - v] for u, v in mirrored],
                  lambda m: m["occlusionTexture"].update(strength=0.5, texCoord=1))
    add_attribute(textured, "TEXCOORD_1", [[u, 1.0 - v] for u, v in mirrored],
                  lambda m: m["pbrMetallicRoughness"]["baseColorTexture"].update(texCoord=1))
    objects = [("dim", occluded, (0.0, 0.8, 1.0)), ("paint", textured, (0.0, -0.8, 1.0))]
    camera, pose, image = lit_from_above(tmp_path, objects, (81, 81, 60.0))

    def at(x: float, y: float):
        col, row = np.round(camera.project(np.array([x, y, 1.0]), *pose)[0]).astype(int)
        return image[row, col]

    ambient = 0.3 * np.array([200.0, 180.0, 160.0])
    assert np.abs(at(0.3, 0.8) - ambient * (1.0 + 0.5 * (64 / 255 - 1.0))).max() <= 1  # east: the dark texels
    assert np.abs(at(-0.3, 0.8) - ambient).max() <= 1  # west: the bright ones
    east, west = at(0.3, -0.8), at(-0.3, -0.8)
    assert np.abs(east - 0.3 * np.array([200.0, 0.0, 0.0])).max() <= 1, east  # red, the texture's west half
    assert np.abs(west - 0.3 * np.array([0.0, 0.0, 160.0])).max() <= 1, west


@pytest.mark.parametrize("name, values, edit, message", [
    ("TANGENT", [[1.0, 0.0, 0.0, 1.0]] * 3 + [[math.nan, 0.0, 0.0, 1.0]], None,
     r"quad\.gltf: material 'm' TANGENT: holds values that are not finite"),
    ("TANGENT", [[1.0, 0.0, 0.0, 1.0]] * 3, None, r"quad\.gltf: material 'm' TANGENT: must be 4 numbers per vertex"),
    ("TANGENT", [[1.0, 0.0, 0.0, 0.0]] * 4, None, r"quad\.gltf: material 'm' TANGENT: w must be \+1 or -1"),
    ("TEXCOORD_2", [[0.0, 0.0]] * 4, lambda m: m["normalTexture"].update(texCoord=1),
     r"quad\.gltf: material 'm': a texture names texCoord 1, but the primitive has no TEXCOORD_1"),
    ("TEXCOORD_1", [[0.0, 0.0]] * 4, lambda m: m["normalTexture"].update(texCoord=2),
     r"quad\.gltf: material 'm' normalTexture: texCoord must be 0 or 1"),
    ("TEXCOORD_1", [[0.0, math.inf]] * 4, lambda m: m["normalTexture"].update(texCoord=1),
     r"quad\.gltf: material 'm' TEXCOORD_1: holds values that are not finite"),
])
def test_a_bad_tangent_or_texcoord_is_one_error_naming_the_file_and_material(tmp_path, name, values, edit, message):
    path = write_gltf(tmp_path / "bad", flat((0, 0, 0)), dict(normalTexture=solid((128, 128, 255))))
    add_attribute(path, name, values, edit)
    with pytest.raises(ParamsError, match=message):
        scene_of(tmp_path, [("quad", path, (0, 0, 1))])


def transform_edit(transform: dict):
    """An ``edit`` that puts ``KHR_texture_transform`` = ``transform`` on the base colour texture."""
    return lambda m: m["pbrMetallicRoughness"]["baseColorTexture"].setdefault("extensions", {}).update(
        KHR_texture_transform=transform)


def test_khr_texture_transform_moves_the_texture_to_the_uvs_it_names(tmp_path):
    """offset (0.5, 0) and scale 0.5 put the quad's whole unit square on the texture's top-right quadrant (glTF's
    uv, v down: u' = 0.5 + 0.5 u, v' = 0.5 v), so the quad is that quadrant's green where the untransformed one
    shows all four; rotation pi/2 with texCoord 0 turns the coordinates to u' = -v, v' = u (the extension's
    translation x rotation x scale)."""
    from aerial_sim.world.assets import load_asset

    quadrants = np.zeros((4, 4, 3), np.uint8)
    quadrants[:2, :2], quadrants[:2, 2:] = (220, 30, 30), (30, 200, 40)  # top row: red, green
    quadrants[2:, :2], quadrants[2:, 2:] = (40, 60, 230), (240, 240, 240)
    moved = write_gltf(tmp_path / "moved", flat((0, 0, 0), 0.6), dict(baseColorTexture=Image.fromarray(quadrants)),
                       transform_edit({"offset": [0.5, 0.0], "scale": [0.5, 0.5]}))
    turned = write_gltf(tmp_path / "turned", flat((0, 0, 0), 0.6), dict(baseColorTexture=Image.fromarray(quadrants)),
                        transform_edit({"rotation": math.pi / 2, "texCoord": 0}))
    green = write_gltf(tmp_path / "green", flat((0, 0, 0), 0.6), dict(baseColorTexture=solid((30, 200, 40))))
    whole = write_gltf(tmp_path / "whole", flat((0, 0, 0), 0.6), dict(baseColorTexture=Image.fromarray(quadrants)))
    plain = load_asset(whole, "test")[0].uv.astype(float)  # trimesh's uv (v up) of each corner
    u, v = plain[..., 0], plain[..., 1]
    np.testing.assert_allclose(load_asset(moved, "test")[0].uv, np.stack([0.5 + 0.5 * u, 0.5 + 0.5 * v], -1),
                               atol=1e-6)
    np.testing.assert_allclose(load_asset(turned, "test")[0].uv, np.stack([v - 1.0, 1.0 - u], -1), atol=1e-6)

    def image_of(path: str):
        folder = tmp_path / f"scene_{Path(path).parent.name}"
        folder.mkdir()
        scene = scene_of(folder, [("quad", path, (0.0, 0.0, 1.0))])
        camera = CameraModel(CameraParams(**DOWN, ambient=0.3, sun_direction_enu=(0.2, 0.1, 1.0)), scene)
        return camera, camera.render((0.0, 0.0, 4.0), LEVEL).color.astype(int)

    camera, moved_image = image_of(moved)
    _, green_image = image_of(green)
    _, whole_image = image_of(whole)
    for x in (-0.25, 0.0, 0.25):
        for y in (-0.25, 0.0, 0.25):
            col, row = np.round(camera.project(np.array([x, y, 1.0]), (0.0, 0.0, 4.0), LEVEL)[0]).astype(int)
            assert np.abs(moved_image[row, col] - green_image[row, col]).max() <= 1, (x, y)
    corners = [whole_image[tuple(np.round(camera.project(np.array([x, y, 1.0]), (0.0, 0.0, 4.0), LEVEL)[0][::-1])
                                 .astype(int))] for x, y in ((-0.4, 0.4), (0.4, 0.4), (-0.4, -0.4), (0.4, -0.4))]
    assert len({tuple(c) for c in corners}) == 4  # untransformed: four different quadrants


@pytest.mark.parametrize("transform, message", [
    ({"offset": [0.5, "x"]}, r"quad\.gltf: material 'm' baseColorTexture KHR_texture_transform\.offset: must be 2 "
                             r"finite numbers"),
    ({"scale": [2.0]}, r"quad\.gltf: material 'm' baseColorTexture KHR_texture_transform\.scale: must be 2 finite"),
    ({"rotation": "quarter"}, r"quad\.gltf: material 'm' baseColorTexture KHR_texture_transform\.rotation: must be a "
                              r"finite number"),
    ({"texCoord": 3}, r"quad\.gltf: material 'm' baseColorTexture: KHR_texture_transform\.texCoord must be 0 or 1"),
    ("sideways", r"quad\.gltf: material 'm' baseColorTexture KHR_texture_transform: must be an object"),
])
def test_a_bad_texture_transform_is_one_error_naming_the_file_material_and_key(tmp_path, transform, message):
    path = write_gltf(tmp_path / "bad", flat((0, 0, 0)), dict(baseColorTexture=solid((30, 200, 40))),
                      transform_edit(transform))
    with pytest.raises(ParamsError, match=message):
        scene_of(tmp_path, [("quad", path, (0, 0, 1))])
