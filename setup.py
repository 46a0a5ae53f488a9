"""ament_python package definition for aerial_sim.

Works for `colcon build` in a ROS 2 workspace (console scripts land in
lib/aerial_sim so `ros2 run` / `ros2 launch` find them) and for a plain
`pip install .`. Node executables are discovered from src/aerial_sim/nodes/,
so adding a node never means editing this file.
"""

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "aerial_sim"
HERE = Path(__file__).parent
NODE_MODULES = sorted(
    p.stem for p in (HERE / "src" / PACKAGE / "nodes").glob("*.py") if not p.stem.startswith("_")
)


def tree(directory: str) -> list[tuple[str, list[str]]]:
    """data_files entries installing every file under ``directory`` into share/aerial_sim."""
    entries = {}
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file():
            entries.setdefault(f"share/{PACKAGE}/{path.parent.as_posix()}", []).append(path.as_posix())
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    package_dir={"": "src"},
    packages=find_packages("src"),
    data_files=[
        ("share/ament_index/resource_index/packages", ["src/resource/" + PACKAGE]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *tree("launch"),
        *tree("config"),
        *tree("rviz"),
    ],
    install_requires=["setuptools", "numpy", "pyyaml", "pymap3d", "fluids", "jsonschema"],
    zip_safe=True,
    maintainer="aerial_sim developers",
    maintainer_email="aerial-sim@example.org",
    description="AirSim-class aerial-vehicle simulation as composable ROS 2 Python nodes.",
    license="MIT",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [f"{name} = {PACKAGE}.nodes.{name}:main" for name in NODE_MODULES]
        + [f"{PACKAGE} = {PACKAGE}.cli.main:main"],
    },
    # ament_python convention: executables in lib/<package> for `ros2 run`.
    options={"install": {"install_scripts": f"$base/lib/{PACKAGE}"}, "develop": {"script_dir": f"$base/lib/{PACKAGE}"}},
)
