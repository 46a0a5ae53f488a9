"""Issue 10: the default run folder works every time — a new runs/<date-time>/ per run, runs/latest
links to it, and the nodes of one launch (recorder, mission) agree on it without talking.

Each resolver runs in a process of its own, as the nodes do (the folder is named after the
launcher that started them, read from /proc).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import SRC

RESOLVE = "from aerial_sim.run_folder import resolve_run_dir; print(resolve_run_dir('auto').resolve())"


def resolve_in(cwd: Path) -> Path:
    done = subprocess.run([sys.executable, "-c", RESOLVE], cwd=cwd, capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(SRC)})
    return Path(done.stdout.strip())


def test_every_run_gets_a_new_folder_and_latest_follows(tmp_path):
    first, second = resolve_in(tmp_path), resolve_in(tmp_path)  # the same second, typically
    assert first != second and first.is_dir() and second.is_dir()
    assert first.parent == second.parent == (tmp_path / "runs").resolve()
    assert (tmp_path / "runs" / "latest").resolve() == second


def test_the_nodes_of_one_launch_share_one_folder(tmp_path):
    """A stand-in launcher (its command line reads 'aerial_sim launch') starts three resolvers."""
    launcher = tmp_path / "aerial_sim"
    launcher.write_text(textwrap.dedent(f"""
        import subprocess, sys
        children = [subprocess.Popen([sys.executable, "-c", {RESOLVE!r}], stdout=subprocess.PIPE, text=True)
                    for _ in range(3)]
        print("\\n".join(child.communicate()[0].strip() for child in children))
    """))
    done = subprocess.run([sys.executable, str(launcher), "launch", "sim.launch.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, check=True, env={"PYTHONPATH": str(SRC)})
    folders = set(done.stdout.split())
    assert len(folders) == 1, done.stdout
    # ...and the next launch gets its own.
    again = subprocess.run([sys.executable, str(launcher), "launch", "sim.launch.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, check=True, env={"PYTHONPATH": str(SRC)})
    assert set(again.stdout.split()).isdisjoint(folders)


def test_an_unusable_folder_is_one_error_naming_it(tmp_path):
    from aerial_sim.run_folder import RunFolderError, resolve_run_dir

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    try:
        resolve_run_dir(str(blocker / "run"))
    except RunFolderError as error:
        assert str(blocker / "run") in str(error)
    else:
        raise AssertionError("a folder inside a file was accepted")
