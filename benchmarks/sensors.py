"""Sensor benchmarks: cost per sample of each model, and CPU share of each node at its default rate.

    tools/dev.sh bench sensors            # models, then nodes fed 250 Hz ground truth for 8 s
    tools/dev.sh bench sensors --models   # models only (no ROS processes)

Figures are noisy on a shared machine; they print, they do not assert.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _results import record, row
from aerial_sim.environment.atmosphere import standard_atmosphere, standard_pressure_pa
from aerial_sim.environment.magnetic import MagneticFieldParams, WorldMagneticModel
from aerial_sim.sensors.barometer import Barometer
from aerial_sim.sensors.resampling import Resampler
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.gps import Gps
from aerial_sim.sensors.imu import Imu, ImuParams
from aerial_sim.sensors.magnetometer import Magnetometer, MagnetometerParams

TRUTH = TruthSample(1.0, position=(10.0, 5.0, 20.0), velocity_world=(1.0, 0.5, 0.0))
ROTORS = (600.0, 605.0, 598.0, 602.0)


def per_call_us(function, n: int) -> float:
    function()  # warm up (imports, caches)
    start = time.perf_counter()
    for _ in range(n):
        function()
    return (time.perf_counter() - start) / n * 1e6


def bench_models() -> None:
    """Print (and record in doc/results/sensors.json) each model's cost per sample."""
    imu, vib = Imu(), Imu(ImuParams(vibration_enabled=True))
    baro, gps = Barometer(), Gps()
    mag_dipole = Magnetometer()
    mag_wmm = Magnetometer(MagnetometerParams(field=MagneticFieldParams(model="wmm")))
    wmm = WorldMagneticModel(mag_wmm.field.decimal_year)
    resampler, k = Resampler(200.0), [0]

    def push():
        k[0] += 1
        resampler.push(TruthSample(k[0] / 250.0))

    rows = [
        ("imu (MPU-6000)", lambda: imu.step(0.005, TRUTH), 20000),
        ("imu + vibration", lambda: vib.step(0.005, TRUTH, ROTORS), 20000),
        ("barometer (MS5611)", lambda: baro.step(0.02, TRUTH), 5000),
        ("magnetometer, dipole", lambda: mag_dipole.step(0.02, TRUTH), 5000),
        ("magnetometer, WMM cached", lambda: mag_wmm.step(0.02, TRUTH), 5000),
        ("WMM evaluation (uncached)", lambda: wmm(47.64, -122.14, 150.0), 500),
        ("gps", lambda: gps.step(0.02, TRUTH), 5000),
        ("atmosphere, fluids ATMOSPHERE_1976", lambda: standard_atmosphere(150.0), 20000),
        ("atmosphere, pressure only", lambda: standard_pressure_pa(150.0), 20000),
        ("resampler push (250 -> 200 Hz)", push, 20000),
    ]
    print("model cost per sample (us)")
    results = []
    for name, function, n in rows:
        us = per_call_us(function, n)
        print(f"  {name:<34} {us:8.1f}")
        results.append(row(name, round(us, 1), "us per sample"))
    record("sensors", "Sensor models (FSR 2017 sec. 3.4), cost per sample", results, "tools/dev.sh bench sensors --models",
           notes="The node CPU shares that `tools/dev.sh bench sensors` prints after these are not recorded.")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_nodes(duration_s: float = 8.0) -> None:
    import rclpy
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu as ImuMsg

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.stamps import to_stamp

    nodes = {"imu": "200 Hz", "barometer": "50 Hz", "magnetometer": "75 Hz", "gps": "50 Hz"}
    processes = {
        name: subprocess.Popen([sys.executable, "-m", f"aerial_sim.nodes.{name}", "--ros-args", "-r", "__ns:=/bench",
                                "-p", "use_sim_time:=true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name in nodes
    }
    rclpy.init()
    node = rclpy.create_node("sensor_bench_feeder")
    qos = stream_qos(False)
    clock = node.create_publisher(Clock, "/clock", qos)
    odom_pub = node.create_publisher(Odometry, "/bench/ground_truth/odom", qos)
    imu_pub = node.create_publisher(ImuMsg, "/bench/ground_truth/imu", qos)
    try:
        deadline = time.monotonic() + 30
        while (odom_pub.get_subscription_count() < 3 or imu_pub.get_subscription_count() < 1) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        time.sleep(1.0)  # let start-up work finish
        before = {name: cpu_seconds(p.pid) for name, p in processes.items()}
        start = time.monotonic()
        k = 0
        while (now := time.monotonic()) - start < duration_s:
            stamp = to_stamp(k / 250.0)
            clock.publish(Clock(clock=stamp))
            odom, imu = Odometry(), ImuMsg()
            odom.header.stamp = imu.header.stamp = stamp
            odom.pose.pose.orientation.w = imu.orientation.w = 1.0
            odom.pose.pose.position.x = k / 250.0
            imu.linear_acceleration.z = 9.80665
            odom_pub.publish(odom)
            imu_pub.publish(imu)
            k += 1
            time.sleep(max(0.0, start + k / 250.0 - time.monotonic()))
        wall = time.monotonic() - start
        print(f"node CPU share, fed 250 Hz ground truth for {wall:.1f} s (one core = 100 %)")
        for name, p in processes.items():
            share = (cpu_seconds(p.pid) - before[name]) / wall * 100
            print(f"  {name:<13} at {nodes[name]:>6}: {share:5.1f} %")
    finally:
        for p in processes.values():
            p.terminate()
            p.wait(timeout=10)
        node.destroy_node()
        rclpy.shutdown()


if __name__ == "__main__":
    bench_models()
    if "--models" not in sys.argv:
        bench_nodes()
