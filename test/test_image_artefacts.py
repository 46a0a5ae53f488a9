"""AirSim's horizontal image artefacts (NoiseSettings Horz*, aerial_sim.world.image_artefacts): each shows the
property its settings say, seeded; a settings file's entry turns them on at AirSim's defaults."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aerial_sim.airsim.settings import camera_artefacts, parse_settings
from aerial_sim.config import ParamsError
from aerial_sim.world.image_artefacts import AIRSIM_DEFAULTS, ImageArtefacts, apply_artefacts

HEIGHT, WIDTH = 200, 400


def edge_image() -> np.ndarray:
    """Black left half, white right half: a vertical edge between columns 199 and 200."""
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    image[:, WIDTH // 2:] = 255
    return image


def edge_columns(image: np.ndarray) -> np.ndarray:
    """Where each row's dark-to-bright edge lies (sub-pixel: the count of pixels below half brightness is the
    column of the crossing for a monotone row)."""
    return (image[:, :, 0].astype(float) / 255.0 < 0.5).sum(axis=1) + 0.0


def test_the_horizontal_wave_shifts_a_band_of_rows_by_its_strength_and_leaves_the_rest():
    """HorzWave: the band's centre row shows the image shifted sideways by Strength x W, the shift falls off as
    exp(-(dy / (0.05 VertSize H))^2) (its half-maximum width 2 sqrt(ln 2) 0.05 VertSize H rows), rows 4 band
    sizes away are untouched; a contrib c blends the ghost in at c."""
    strength = 0.1
    for vert_size in (1.0, 2.0):
        params = ImageArtefacts(wave_contrib=1.0, wave_strength=strength, wave_vert_size=vert_size)
        for stamp in range(50):  # the first frame whose band lies well inside the image
            shift = edge_columns(apply_artefacts(edge_image(), params, seed=3, stamp_ns=stamp)) - WIDTH / 2
            centre = int(np.argmax(shift))
            if 0.3 * HEIGHT < centre < 0.7 * HEIGHT:
                break
        assert shift.max() == pytest.approx(strength * WIDTH, abs=1.0)
        half = np.flatnonzero(shift > shift.max() / 2)
        assert len(half) == pytest.approx(2 * math.sqrt(math.log(2)) * 0.05 * vert_size * HEIGHT, abs=2)
        assert np.array_equal(half, np.arange(half[0], half[-1] + 1))  # one band
        far = np.abs(np.arange(HEIGHT) - centre) > 4 * 0.05 * vert_size * HEIGHT
        assert np.all(np.abs(shift[far]) < 0.5)
    faint = apply_artefacts(edge_image(), ImageArtefacts(wave_contrib=0.03, wave_strength=strength), 3, stamp)
    difference = np.abs(faint.astype(int) - edge_image())
    assert difference.max() == round(0.03 * 255)  # a 3 % ghost of the white half on the black one


def test_horizontal_noise_lines_put_grey_noise_on_the_share_of_rows_and_pixels_their_densities_say():
    """HorzNoiseLines: a row is a noise line with probability DensityXY, a pixel of a noise line is noise with
    probability DensityY; noise is grey (R = G = B), uniform 0..255 (mean 127.5); other rows are untouched.
    Tolerances: 4 binomial standard deviations."""
    grey = np.full((HEIGHT, WIDTH, 3), 128, np.uint8)
    params = ImageArtefacts(lines_contrib=1.0, lines_density_xy=0.3, lines_density_y=0.2)
    out = apply_artefacts(grey, params, seed=5, stamp_ns=1_000)
    changed = (out != grey).any(axis=2)
    lines = changed.any(axis=1)
    assert lines.mean() == pytest.approx(0.3, abs=4 * math.sqrt(0.3 * 0.7 / HEIGHT))
    share = changed[lines].mean()
    count = lines.sum() * WIDTH
    assert share == pytest.approx(0.2 * (1 - 1 / 255), abs=4 * math.sqrt(0.2 * 0.8 / count))
    noise = out[changed]
    assert np.all(noise[:, 0] == noise[:, 1]) and np.all(noise[:, 1] == noise[:, 2])
    assert noise[:, 0].mean() == pytest.approx(127.5, abs=4 * 73.6 / math.sqrt(len(noise)))
    half = apply_artefacts(grey, ImageArtefacts(lines_contrib=0.5, lines_density_xy=0.3, lines_density_y=0.2), 5, 1_000)
    assert np.all(np.abs(half.astype(int) - 128) <= 64)  # blended half way toward the noise


def test_horizontal_distortion_jitters_each_row_within_its_strength():
    """HorzDistortion: each row shifted sideways by Strength x W x r, r uniform in [-1, 1] per row: shifts
    within +-Strength x W, spread as a uniform's (std Strength W / sqrt 3), new each frame, the same for the
    same seed and stamp."""
    strength = 0.01  # +-4 px
    params = ImageArtefacts(distortion_contrib=1.0, distortion_strength=strength)
    out = apply_artefacts(edge_image(), params, seed=2, stamp_ns=77)
    shift = edge_columns(out) - WIDTH / 2
    assert np.abs(shift).max() <= strength * WIDTH + 0.5
    assert np.std(shift) == pytest.approx(strength * WIDTH / math.sqrt(3), rel=0.25)
    assert abs(np.mean(shift)) < 4 * strength * WIDTH / math.sqrt(3 * HEIGHT)
    assert np.array_equal(apply_artefacts(edge_image(), params, 2, 77), out)
    assert not np.array_equal(apply_artefacts(edge_image(), params, 2, 78), out)
    assert not np.array_equal(apply_artefacts(edge_image(), params, 3, 77), out)


def test_a_settings_entry_draws_the_artefacts_it_names_and_airsims_defaults_for_the_others():
    settings = parse_settings({"Vehicles": {"Drone1": {"Cameras": {
        "0": {"NoiseSettings": [{"Enabled": True, "HorzWaveContrib": 0.5, "HorzWaveVertSize": 2,
                                 "HorzNoiseLinesContrib": 0}]},
        "off": {"NoiseSettings": [{"Enabled": False, "HorzWaveContrib": 1}]}}}}})
    assert settings.warnings == ()  # Horz* keys are made, not warned about
    artefacts, key = camera_artefacts(settings, "drone1")
    assert key == "Vehicles/Drone1/Cameras/0/NoiseSettings"
    assert artefacts == ImageArtefacts(wave_contrib=0.5, wave_strength=0.08, wave_vert_size=2.0, lines_contrib=0.0,
                                       distortion_contrib=1.0, distortion_strength=0.002)
    assert not camera_artefacts(settings, "drone1", "off")[0].active
    assert camera_artefacts(settings, "drone1", "bottom_center") is None
    assert AIRSIM_DEFAULTS.active
    with pytest.raises(ParamsError, match="wave_contrib: must be in"):
        ImageArtefacts(wave_contrib=math.nan)


def test_the_airsim_servers_scene_images_carry_the_settings_artefacts():
    """A settings camera whose noise lines cover every pixel (both densities 1, contrib 1) serves Scene images of
    grey noise only (R = G = B, spread over the 8-bit range), the same for the same stamp; its depth is exact."""
    from aerial_sim.airsim.camera_rig import CameraRig
    from aerial_sim.world.camera import CameraParams
    from aerial_sim.world.lens import LensParams
    from aerial_sim.world.scene import load_scene

    settings = parse_settings({"Vehicles": {"Drone1": {"Cameras": {"0": {"NoiseSettings": [
        {"Enabled": True, "RandContrib": 0, "HorzWaveContrib": 0, "HorzDistortionContrib": 0,
         "HorzNoiseLinesContrib": 1, "HorzNoiseLinesDensityXY": 1, "HorzNoiseLinesDensityY": 1}]}}}}})
    rig = CameraRig(load_scene("empty"), CameraParams(width=64, height=48), settings, lens=LensParams(noise_seed=4))
    pose = ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0))

    def image(stamp_ns: int) -> np.ndarray:
        response = rig.render("Drone1", [("0", 0, False, False)], *pose, stamp_ns)[0]
        return np.frombuffer(response["image_data_uint8"], np.uint8).reshape(response["height"], response["width"], 3)

    first = image(10)
    assert np.all(first[..., 0] == first[..., 1]) and np.all(first[..., 1] == first[..., 2])
    assert first.min() < 20 and first.max() > 235
    assert np.array_equal(image(10), first) and not np.array_equal(image(11), first)
