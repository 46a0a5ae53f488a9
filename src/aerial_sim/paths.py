"""Where the package's shared files (launch/, config/, rviz/) live.

In a colcon install they are in ``share/aerial_sim`` (found through the ament
index); in the pip-only source layout they are at the repository root, two
levels above this file. ``AERIAL_SIM_SHARE`` overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_NAME = "aerial_sim"


def package_share() -> Path:
    """Return the directory holding ``launch/``, ``config/`` and ``rviz/``."""
    override = os.environ.get("AERIAL_SIM_SHARE")
    if override:
        return Path(override)
    source_root = Path(__file__).resolve().parents[2]
    if (source_root / "launch").is_dir() and (source_root / "config").is_dir():
        return source_root
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE_NAME))
    except (ImportError, LookupError):
        return source_root


def config_path(*parts: str) -> Path:
    """Path of a file under the package's ``config/`` directory."""
    return package_share().joinpath("config", *parts)


def resolve_config(name_or_path: str, subdir: str) -> Path:
    """Resolve a config given as a path, or as a bare name under ``config/<subdir>/``.

    ``resolve_config('quad_x', 'vehicles')`` -> ``<share>/config/vehicles/quad_x.yaml``.
    """
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix in (".yaml", ".yml") or candidate.is_absolute() or os.sep in name_or_path:
        return candidate
    return config_path(subdir, f"{name_or_path}.yaml")
