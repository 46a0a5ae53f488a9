"""AirSim's state and sensor methods: multirotor state, ground truth, collisions, home point, rotors,
environment, and the IMU, barometer, magnetometer, GPS, distance and lidar readings (AIRSIM_API.md).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.airsim import wire
from aerial_sim.airsim.graph import VehicleLink
from aerial_sim.airsim.ned import body_covariance_to_frd, body_to_frd, orientation_to_ned, world_to_ned
from aerial_sim.airsim.wire import RpcFault
from aerial_sim.environment.atmosphere import standard_atmosphere
from aerial_sim.environment.gravity import normal_gravity

LANDED, FLYING = 0, 1
TESLA_TO_GAUSS = 1e4
STANDARD_SEA_LEVEL_PA = 101325.0


class SensorMethods:
    """AirSim's state and sensor methods, mixed into :class:`~aerial_sim.airsim.api.AirSimApi`
    (whose state they use)."""

    # -- state ----------------------------------------------------------------------------------
    async def rpc_getMultirotorState(self, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        state = self.kinematics(link)
        rc = self._rc.get(link.name)
        # Ground truth changes 250 times a second; clients poll faster: answer from a cache per snapshot.
        key = (id(state), link.controller_mode, id(rc))
        cached = self._state_cache.get(link.name)
        if cached is not None and cached[0] == key and cached[1] is state:
            return cached[2]
        answer = {
            "collision": self._collision(link),
            "kinematics_estimated": _kinematics(state),
            "gps_location": self._geo(state.position),
            "timestamp": stamp_ns(state.time_s),
            "landed_state": FLYING if self._flying(link) else LANDED,
            "rc_data": wire.rc_data(**({k: rc[k] for k in ("roll", "pitch", "yaw", "throttle")} | {"is_valid": True})
                                    if rc else {}),
        }
        self._state_cache[link.name] = (key, state, answer)
        return answer

    async def rpc_simGetGroundTruthKinematics(self, vehicle_name=""):
        return _kinematics(self.kinematics(self.vehicle(vehicle_name)))

    async def rpc_simGetVehiclePose(self, vehicle_name=""):
        state = self.kinematics(self.vehicle(vehicle_name))
        return wire.pose(world_to_ned(state.position), orientation_to_ned(state.orientation))

    async def rpc_simGetCollisionInfo(self, vehicle_name=""):
        return self._collision(self.vehicle(vehicle_name))

    async def rpc_getHomeGeoPoint(self, vehicle_name=""):
        self.vehicle(vehicle_name)
        home = self.params.home
        return wire.geo_point(home.latitude, home.longitude, home.altitude)

    async def rpc_getRotorStates(self, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        if link.rotors is None:
            raise RpcFault(f"no rotor states received yet for '{link.name}' (topic {link.name}/rotors)")
        rotors = []
        for rotor, speed, thrust in zip(link.vehicle.rotors, link.rotors.speeds_rad_s, link.rotors.thrusts_n):
            torque_per_newton = rotor.max_torque_nm() / rotor.max_thrust_n()
            rotors.append({"thrust": float(thrust), "torque_scaler": float(-rotor.turning_direction * thrust * torque_per_newton),
                           "speed": float(speed)})
        return {"rotors": rotors, "timestamp": stamp_ns(link.rotors.time_s)}

    async def rpc_simGetGroundTruthEnvironment(self, vehicle_name=""):
        state = self.kinematics(self.vehicle(vehicle_name))
        altitude = self.params.home.altitude + state.position[2]
        try:
            air = standard_atmosphere(altitude)
        except ValueError as error:
            raise RpcFault(str(error)) from None
        return {
            "position": wire.vector3r(world_to_ned(state.position)),
            "geo_point": self._geo(state.position),
            "gravity": wire.vector3r((0.0, 0.0, normal_gravity(self.params.home.latitude, altitude))),
            "air_pressure": air.pressure_pa,
            "temperature": air.temperature_k,
            "air_density": air.density_kg_m3,
        }

    def _collision(self, link: VehicleLink) -> dict:
        """Deepest contact of the body box with the ground or a scene object at the current pose (latched)."""
        state = link.kinematics
        latched = self._collisions.get(link.name, wire.collision_info())
        if state is None:
            return latched
        half = tuple(0.5 * s for s in link.vehicle.body_box_m)
        reach = math.hypot(*half)
        position = np.asarray(state.position)
        near = np.all((position + reach >= self._bounds_low) & (position - reach <= self._bounds_high), axis=1)
        deepest = None
        for index in np.flatnonzero(near):
            name, object_id, collider = self.colliders[index]
            contact = collider.contact(state.position, state.orientation, half)
            if contact is not None and (deepest is None or contact.depth_m > deepest[2].depth_m):
                deepest = (name, object_id, contact)
        if deepest is None:
            latched = dict(latched, has_collided=False)
        else:
            name, object_id, contact = deepest
            latched = wire.collision_info(True, contact.depth_m, stamp_ns(state.time_s), world_to_ned(contact.normal),
                                          world_to_ned(contact.point), world_to_ned(state.position), name, object_id)
        self._collisions[link.name] = latched
        return latched

    # -- sensors --------------------------------------------------------------------------------
    async def rpc_getImuData(self, imu_name="", vehicle_name=""):
        imu = self._reading(self.vehicle(vehicle_name), "imu", "IMU", "imu/data")
        return {
            "time_stamp": stamp_ns(imu.time_s),
            "orientation": wire.quaternionr(orientation_to_ned(imu.orientation)),
            "angular_velocity": wire.vector3r(body_to_frd(imu.angular_velocity)),
            "linear_acceleration": wire.vector3r(body_to_frd(imu.linear_acceleration)),
        }

    async def rpc_getBarometerData(self, barometer_name="", vehicle_name=""):
        reading = self._reading(self.vehicle(vehicle_name), "pressure", "barometer", "air_pressure")
        return {
            "time_stamp": stamp_ns(reading.time_s),
            "altitude": pressure_altitude(reading.pressure_pa),
            "pressure": reading.pressure_pa,
            "qnh": STANDARD_SEA_LEVEL_PA / 100.0,
        }

    async def rpc_getMagnetometerData(self, magnetometer_name="", vehicle_name=""):
        reading = self._reading(self.vehicle(vehicle_name), "magnetic", "magnetometer", "magnetic_field")
        return {
            "time_stamp": stamp_ns(reading.time_s),
            "magnetic_field_body": wire.vector3r([v * TESLA_TO_GAUSS for v in body_to_frd(reading.field_tesla)]),
            "magnetic_field_covariance": [c * TESLA_TO_GAUSS**2 for c in body_covariance_to_frd(reading.covariance)],
        }

    async def rpc_getGpsData(self, gps_name="", vehicle_name=""):
        gps = self._reading(self.vehicle(vehicle_name), "gps", "GPS", "gps/fix")
        fix_type = 0 if not gps.has_fix else (3 if gps.eph_m <= 3.0 else 2)
        stamp = stamp_ns(gps.time_s)
        return {
            "time_stamp": stamp,
            "gnss": {
                "geo_point": wire.geo_point(gps.latitude, gps.longitude, gps.altitude),
                "eph": gps.eph_m,
                "epv": gps.epv_m,
                "velocity": wire.vector3r(world_to_ned(gps.velocity_enu)),
                "fix_type": fix_type,
                "time_utc": stamp // 1000,
            },
            "is_valid": gps.has_fix,
        }

    def _named(self, link: VehicleLink, kind: str, name) -> bool:
        """Whether ``name`` is one of ``link``'s settings-file sensors of ``kind`` (cast on request); an
        unknown non-empty name is an error when the settings file names sensors of that kind."""
        name = wire.text(name, f"{kind.lower()}_name")
        sensors = self.named_sensors
        names = sensors.names(link.name, kind) if sensors is not None else []
        if name in names:
            return True
        if name and names:
            raise RpcFault(f"no {kind} named '{name}' on '{link.name}' (have: {', '.join(names)})")
        return False

    async def rpc_getDistanceSensorData(self, distance_sensor_name="", vehicle_name=""):
        link = self.vehicle(vehicle_name)
        if self._named(link, "Distance", distance_sensor_name):
            state = self.kinematics(link)
            reading = self.named_sensors.distance(link.name, distance_sensor_name, state.time_s, state.position,
                                                  state.orientation)
            mount = reading.mount
            w, x, y, z = mount.orientation
            relative = wire.pose(body_to_frd(mount.position_m), (w, x, -y, -z))  # FLU -> FRD mount
        else:
            reading = self._reading(link, "distance", "distance sensor", "distance/range")
            relative = wire.pose((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
        return {
            "time_stamp": stamp_ns(reading.time_s),
            "distance": reading.distance_m,
            "min_distance": reading.min_m,
            "max_distance": reading.max_m,
            "relative_pose": relative,
        }

    async def rpc_getLidarData(self, lidar_name="", vehicle_name=""):
        link = self.vehicle(vehicle_name)
        if self._named(link, "Lidar", lidar_name):
            state = self.kinematics(link)
            lidar = self.named_sensors.lidar(link.name, lidar_name, state.time_s, state.position, state.orientation)
        else:
            lidar = self._reading(link, "lidar", "lidar", "lidar/points")
        points = np.asarray(lidar.points, np.float32).reshape(-1, 3).copy()
        points[:, 1:] *= -1.0  # sensor FLU -> FRD
        state = self.kinematics(link)
        segmentation = [int(v) for v in np.asarray(lidar.segmentation).ravel()]
        return {
            "time_stamp": stamp_ns(lidar.time_s),
            "point_cloud": points.ravel().tolist(),
            "pose": wire.pose(world_to_ned(state.position), orientation_to_ned(state.orientation)),
            "segmentation": segmentation,
            "groundtruth": [str(v) for v in segmentation],  # cosysairsim's name for the same labels
        }

    def _reading(self, link: VehicleLink, attribute: str, sensor: str, topic: str):
        reading = getattr(link, attribute)
        if reading is None:
            raise RpcFault(f"no {sensor} data for '{link.name}': nothing received on {link.name}/{topic} "
                           f"(is the {sensor} node running?)")
        return reading


def stamp_ns(seconds: float) -> int:
    """Simulation seconds -> AirSim's time stamps (nanoseconds)."""
    return int(round(seconds * 1e9))


def _kinematics(state) -> dict:
    return wire.kinematics_state(
        world_to_ned(state.position),
        orientation_to_ned(state.orientation),
        world_to_ned(state.velocity_world),
        body_to_frd(state.angular_velocity_body),
        world_to_ned(state.linear_acceleration_world),
        body_to_frd(state.angular_acceleration_body),
    )


def pressure_altitude(pressure_pa: float) -> float:
    """Altitude (m) of ``pressure_pa`` in the 1976 standard atmosphere's troposphere (AirSim's barometer altitude)."""
    if pressure_pa <= 0 or not math.isfinite(pressure_pa):
        return math.nan
    return 44330.769 * (1.0 - (pressure_pa / STANDARD_SEA_LEVEL_PA) ** 0.190263)
