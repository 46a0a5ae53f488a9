"""Throwaway virtual environments holding the real AirSim Python clients, built once and cached.

``airsim`` 1.8.1 and ``cosysairsim`` 3.5.0 both install a module named
``msgpackrpc`` (different versions), and ``airsim`` needs NumPy < 2, so each
gets its own venv under ``~/.cache/aerial_sim/airsim_clients/`` (override with
``AERIAL_SIM_CACHE``), keyed by its install recipe: the first run builds it
(about 20 s, from PyPI), later runs reuse it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

#: pip install steps per client (AIRSIM_API.md, "Install").
RECIPES = {
    # airsim's setup.py imports numpy and msgpackrpc: install them first, build without isolation; its
    # declared opencv-contrib-python dependency is only used by its examples (and pulls NumPy 2): --no-deps.
    "airsim": [["numpy<2", "msgpack-rpc-python==0.4.1", "tornado<5", "setuptools", "wheel"],
               ["--no-build-isolation", "--no-deps", "airsim==1.8.1"]],
    "cosysairsim": [["cosysairsim==3.5.0"]],
}


class ClientUnavailable(RuntimeError):
    """The client could not be installed (no package registry reachable)."""


def cache_root() -> Path:
    return Path(os.environ.get("AERIAL_SIM_CACHE", Path.home() / ".cache" / "aerial_sim")) / "airsim_clients"


def client_python(name: str) -> Path:
    """The Python interpreter of a venv holding client ``name`` (built on first use)."""
    recipe = RECIPES[name]
    key = hashlib.sha256(repr(recipe).encode()).hexdigest()[:12]
    venv = cache_root() / f"{name}-{key}"
    python = venv / "bin" / "python"
    done = venv / ".complete"
    if done.exists():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time (parallel test runs)
        if done.exists():
            return python
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", "--clear", str(venv)], name)
        for step in recipe:
            _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *step], name)
        done.write_text("ok\n")
    return python


def _run(command: list[str], name: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise ClientUnavailable(f"installing the {name} client failed: {' '.join(command[-3:])}\n"
                                f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
