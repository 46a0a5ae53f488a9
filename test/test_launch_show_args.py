"""``aerial_sim launch FILE --show-args`` lists what ``ros2 launch FILE --show-args`` lists: the
file's own arguments, then those of the files it includes (whatever their conditions say), each
name once. It listed the file's own only (sim.launch.yaml: 32 of the 59 ros2 launch listed then)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"


def arguments_and_includes(path: Path) -> tuple[list[str], list[Path]]:
    """The ``arg`` names declared anywhere in a launch file (groups too) and the package files it includes."""
    names, includes = [], []

    def visit(entities):
        for entity in entities or []:
            ((tag, body),) = entity.items()
            if tag == "arg":
                names.append(body["name"])
            elif tag == "group":
                visit(body.get("children"))
            elif tag == "include":
                file = body if isinstance(body, str) else body["file"]
                included = re.fullmatch(r"\$\(find-pkg-share aerial_sim\)/launch/(.+)", file)
                if included:
                    includes.append(LAUNCH / included.group(1))

    visit(yaml.safe_load(path.read_text())["launch"])
    return names, includes


def test_show_args_lists_the_arguments_of_every_included_file_once():
    shown = subprocess.run([sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", "--show-args"],
                           capture_output=True, text=True, timeout=60, cwd=REPO)
    assert shown.returncode == 0, shown.stderr
    listed = re.findall(r"^    '([^']+)':$", shown.stdout, flags=re.MULTILINE)
    assert len(listed) == len(set(listed)), "a name listed twice"
    own, pending = arguments_and_includes(LAUNCH / "sim.launch.yaml")
    assert listed[:len(own)] == own  # the file's own first, in its order
    everything, seen = set(own), set()
    while pending:
        path = pending.pop()
        if path not in seen:
            seen.add(path)
            names, includes = arguments_and_includes(path)
            everything |= set(names)
            pending += includes
    assert len(seen) >= 5  # sensors, control, camera, ... (the test reads real includes)
    assert set(listed) == everything, sorted(everything ^ set(listed))
