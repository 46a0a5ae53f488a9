"""Reproduce seed 004's figures 4 and 16 from this project's models, as PNG plots.

Figure 4: standard deviation of the depth error vs distance, 0.5-8 m in 1 cm steps
(751 camera positions, one 460x320 frame each, as in sec. 2.2), for cement,
formboard and plastic: the eq. (4) curve and the std measured on the simulated
frames (valid pixels, i.e. without the fill-rate zeros, as a camera user would).
The paper plots a real D435 against the model; with no real data here the plot
shows that the simulated camera follows eq. (4), and prints R^2 against it. Like a
D435, the camera reports nothing outside its 0.2-10 m range, so where eq. (4)'s
std reaches the distance to a range limit (plastic beyond about 6 m) the reported
std is that of a truncated normal (dashed) and fewer pixels return (green).

Figure 16: RMSE of the acceleration predicted by the AirSim drag model and the
rotor drag model (eq. 16) vs flight speed, on a straight line (80 m, longer at
high speed so that each flight cruises for 4 s or more) flown in the pure
physics engine with rotor drag as the truth (the paper used circles and
lemniscates at 1.5-26 m/s; speeds the vehicle cannot reach are skipped).

    tools/dev.sh run python tools/paper_figures.py [OUT_DIR]     # default runs/figures
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402

from aerial_sim.cli.drag_eval import evaluate, simulate_line_flight  # noqa: E402
from aerial_sim.physics.rotor_drag import RotorDragParams  # noqa: E402
from aerial_sim.sensors.depth_noise import PAPER_MATERIALS, DepthNoiseModel, DepthNoiseParams  # noqa: E402

DISTANCES = np.round(np.arange(0.5, 8.0 + 1e-9, 0.01), 2)  # 751 positions
SPEEDS = (1.5, 5.0, 7.5, 10.0, 15.0, 20.0, 26.0)


def figure_4(out: Path) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharey=False)
    params = DepthNoiseParams(seed=4)
    model = DepthNoiseModel(params, materials={1: 0.0})
    for axis, name in zip(axes, ("cement", "formboard", "plastic")):
        m = PAPER_MATERIALS[name]
        segmentation = np.ones((320, 460), np.uint16)
        model.set_material(1, m)
        stds = np.empty(len(DISTANCES))
        returns = np.empty(len(DISTANCES))
        for i, d in enumerate(DISTANCES):
            depth = np.full((320, 460), d, np.float32)
            noisy = model.apply(depth, segmentation)
            stds[i] = np.std(noisy[noisy > 0] - d)
            returns[i] = np.mean(noisy > 0)
        expected = 0.005 * np.exp(m * DISTANCES)
        # What the camera can report: eq. (4)'s normal truncated to the 0.2-10 m range.
        low, high = (params.min_range_m - DISTANCES) / expected, (params.max_range_m - DISTANCES) / expected
        clipped = scipy.stats.truncnorm.std(low, high, scale=expected)
        fill = (1 - params.fill_rate_error) * (scipy.stats.norm.cdf(high) - scipy.stats.norm.cdf(low))
        r2 = r_squared(stds, expected)
        axis.plot(DISTANCES, stds, ".", ms=2, label="simulated std (valid pixels)")
        axis.plot(DISTANCES, expected, "k-", lw=1.2, label=f"eq. (4): 0.005 e^({m:.2f} d)")
        axis.plot(DISTANCES, clipped, "r--", lw=1.0, label="eq. (4) clipped to 0.2-10 m")
        axis.set_title(f"{name} (m = {m:.2f} 1/m): R$^2$ vs eq. (4) {r2:.3f}, vs clipped {r_squared(stds, clipped):.3f}",
                       fontsize=9)
        axis.set_xlabel("distance d (m)")
        axis.set_ylabel("std of depth error (m)")
        axis.grid(alpha=0.3)
        fill_axis = axis.twinx()
        fill_axis.plot(DISTANCES, 100 * returns, "g.", ms=1)
        fill_axis.plot(DISTANCES, 100 * fill, "g-", lw=0.8, label="pixels with a return (%)")
        fill_axis.set_ylim(0, 102)
        fill_axis.set_ylabel("pixels with a return (%)", color="g")
        lines = axis.get_legend_handles_labels()
        more = fill_axis.get_legend_handles_labels()
        axis.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="center left")
        print(f"figure 4, {name}: R^2 of simulated std against eq. (4) = {r2:.4f}, against eq. (4) clipped to the "
              f"range = {r_squared(stds, clipped):.4f} (paper, real D435 vs model: "
              f"{ {'plastic': 0.26, 'cement': 0.71, 'formboard': 0.54}[name] }); at 8 m: std {stds[-1]:.2f} m "
              f"(eq. 4: {expected[-1]:.2f} m), {100 * returns[-1]:.0f} % of pixels return")
    fig.suptitle("Depth error std vs distance, 751 frames of 460x320 per material (seed 004, Fig. 4)")
    fig.tight_layout()
    path = out / "fig4_depth_noise_std.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def r_squared(measured: np.ndarray, model: np.ndarray) -> float:
    return float(1 - np.sum((measured - model) ** 2) / np.sum((measured - measured.mean()) ** 2))


def figure_16(out: Path) -> Path:
    speeds, airsim, rotor = [], [], []
    for speed in SPEEDS:
        log, vehicle = simulate_line_flight(speed, distance_m=max(80.0, 8.0 * speed))  # >= 4 s of cruise
        result = evaluate(log, vehicle, RotorDragParams())
        if result.max_speed_m_s < 0.95 * speed:
            print(f"figure 16: {speed:g} m/s not reached (top {result.max_speed_m_s:.1f} m/s): skipped")
            continue
        speeds.append(speed)
        airsim.append(result.rmse_airsim)
        rotor.append(result.rmse_rotor)
        print(f"figure 16: {speed:5.1f} m/s  RMSE AirSim model {result.rmse_airsim:.3f}, rotor model {result.rmse_rotor:.3f} m/s^2")
    fig, axis = plt.subplots(figsize=(6.5, 4.2))
    x = np.arange(len(speeds))
    axis.bar(x - 0.2, airsim, 0.4, label="AirSim drag model (eq. 5)")
    axis.bar(x + 0.2, rotor, 0.4, label="rotor drag model (eq. 13)")
    axis.set_xticks(x, [f"{s:g} m/s" for s in speeds])
    axis.set_ylabel("RMSE of predicted acceleration (m/s$^2$)")
    axis.set_title("Straight line, rotor drag as the simulated truth (seed 004, Fig. 16)")
    axis.legend()
    axis.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = out / "fig16_drag_rmse.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "runs" / "figures")
    out.mkdir(parents=True, exist_ok=True)
    for path in (figure_4(out), figure_16(out)):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
