"""An AirSim settings file's sensor noise keys as aerial_sim's sensor parameters (pure; no ROS).

AirSim's ``Sensors`` entries of type Barometer (1), Imu (2), Gps (3) and Magnetometer (4) carry the
parameters of AirLib's ``*SimpleParams`` (AirSim's settings documentation, "Sensors"); where one means the
same as a parameter of aerial_sim's sensor model it becomes that parameter, in SI units (``MAPPING``;
the table in doc/airsim_settings.md): IMU random walks and bias stabilities (deg/sqrt(h), m/s/sqrt(h),
deg/h, micro-g) as noise densities and stabilities in rad/s and m/s^2, the barometer's relative
``PressureFactorSigma`` as a drift in Pa at sea level (AirLib scales the pressure by 1 + factor), gauss as
tesla, the GPS's EPH/EPV figures and latency as they are, ``UpdateFrequency`` as ``rate_hz``.

Not mapped (one warning each when given): Magnetometer ScaleFactor, every StartupDelay, Barometer and
Magnetometer UpdateLatency (those models have no latency).
"""

from __future__ import annotations

import math
from typing import Any

STANDARD_GRAVITY = 9.80665
SEA_LEVEL_PRESSURE_PA = 101325.0
DEG = math.pi / 180.0

#: kind -> AirSim key -> (aerial_sim parameter, conversion of the value).
MAPPING: dict[str, dict[str, tuple[str, Any]]] = {
    "Imu": {
        "AngularRandomWalk": ("gyro_noise_density", lambda v: v * DEG / 60.0),
        "GyroBiasStability": ("gyro_bias_stability", lambda v: v * DEG / 3600.0),
        "GyroBiasStabilityTau": ("gyro_bias_tau_s", float),
        "VelocityRandomWalk": ("accel_noise_density", lambda v: v / 60.0),
        "AccelBiasStability": ("accel_bias_stability", lambda v: v * 1e-6 * STANDARD_GRAVITY),
        "AccelBiasStabilityTau": ("accel_bias_tau_s", float),
        "UpdateFrequency": ("rate_hz", float),
    },
    "Barometer": {
        "UncorrelatedNoiseSigma": ("noise_std_pa", float),
        "PressureFactorSigma": ("drift_std_pa", lambda v: v * SEA_LEVEL_PRESSURE_PA),
        "PressureFactorTau": ("drift_tau_s", float),
        "UpdateFrequency": ("rate_hz", float),
    },
    "Magnetometer": {
        "NoiseSigma": ("noise_std_t", lambda v: v * 1e-4),
        "NoiseBias": ("bias_t", lambda v: (v * 1e-4,) * 3),
        "UpdateFrequency": ("rate_hz", float),
    },
    "Gps": {
        "EphTimeConstant": ("eph_tau_s", float),
        "EpvTimeConstant": ("epv_tau_s", float),
        "EphInitial": ("eph_initial_m", float),
        "EpvInitial": ("epv_initial_m", float),
        "EphFinal": ("eph_final_m", float),
        "EpvFinal": ("epv_final_m", float),
        "EphMin3d": ("fix_3d_max_eph_m", float),
        "EphMin2d": ("fix_2d_max_eph_m", float),
        "UpdateLatency": ("latency_s", float),
        "UpdateFrequency": ("rate_hz", float),
    },
}

#: The params dataclass of each model, by AirSim kind (what a sensor node is given).
KIND_OF_PARAMS = {"ImuParams": "Imu", "BarometerParams": "Barometer", "MagnetometerParams": "Magnetometer",
                  "GpsParams": "Gps"}


def noise_keys(kind: str) -> set[str]:
    """The AirSim keys of a sensor kind that map (the settings reader warns about the others)."""
    return set(MAPPING.get(kind, {}))


def sensor_parameters(kind: str, airsim_params: dict) -> dict[str, Any]:
    """aerial_sim parameters for one AirSim sensor entry's mapped keys (others left out)."""
    mapping = MAPPING.get(kind, {})
    return {mapping[key][0]: mapping[key][1](float(value)) for key, value in airsim_params.items() if key in mapping}


def vehicle_sensor_parameters(settings, vehicle_name: str, kind: str) -> dict[str, Any]:
    """What ``settings`` (:class:`~aerial_sim.airsim.settings.AirSimSettings`) set for the ``kind`` sensor of the
    graph's vehicle ``vehicle_name`` (:meth:`~aerial_sim.airsim.settings.AirSimSettings.vehicle_for`): its first
    enabled sensor of that kind. Empty when none applies."""
    vehicle = settings.vehicle_for(vehicle_name)
    if vehicle is None:
        return {}
    sensor = next((s for s in vehicle.sensors if s.kind == kind and s.enabled), None)
    return sensor_parameters(kind, sensor.params) if sensor is not None else {}
