"""Removing dead Fast DDS participants' shared memory (aerial_sim.launcher.shared_memory), on files
made here with the same names and locks; the real thing is in test_launcher_process.py."""

from __future__ import annotations

import fcntl
import os
import time

from aerial_sim.launcher.shared_memory import MIN_AGE_S, remove_dead_participants


def segment(directory, guid: str, size: int = 0, age_s: float = 60.0):
    """A segment of ``size`` written bytes and its lock file, both ``age_s`` old."""
    data, lock = directory / f"fastdds_{guid}", directory / f"fastdds_{guid}_el"
    data.write_bytes(b"\1" * size)
    lock.touch()
    then = time.time() - age_s
    for path in (data, lock):
        os.utime(path, (then, then))
    return data, lock


def test_only_segments_whose_lock_nobody_holds_and_old_enough_are_removed(tmp_path):
    dead = segment(tmp_path, "00000000000000aa", size=65536)
    live = segment(tmp_path, "00000000000000bb")
    young = segment(tmp_path, "00000000000000cc", age_s=MIN_AGE_S / 4)
    others = [tmp_path / "fastdds_port7000", tmp_path / "fastdds_port7000_el", tmp_path / "sem.fastdds_port7000_mutex",
              tmp_path / "fastdds_nothex0000000_el", tmp_path / "unrelated"]
    for path in others:
        path.touch()
        os.utime(path, (0, 0))
    # Anyone may write to /dev/shm: a lock name that is a link (even dangling) or a folder is left as it is.
    (tmp_path / "fastdds_00000000000000dd_el").symlink_to(tmp_path / "unrelated")
    (tmp_path / "fastdds_00000000000000ee_el").symlink_to(tmp_path / "nowhere")
    (tmp_path / "fastdds_00000000000000ff_el").mkdir()
    others += [tmp_path / f"fastdds_00000000000000{x}_el" for x in ("dd", "ee", "ff")]
    with open(live[1], "ab") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as its live owner does
        removed = remove_dead_participants(tmp_path)
    assert removed.segments == 1
    assert removed.bytes >= 65536  # the RAM the written pages held
    assert not dead[0].exists() and not dead[1].exists()
    assert all(path.is_symlink() or path.exists() for path in (*live, *young, *others))
    assert not (tmp_path / "nowhere").exists()  # nothing created through a link
    assert "1 Fast DDS participant(s)" in removed.summary()


def test_a_missing_or_unreadable_directory_removes_nothing(tmp_path):
    assert remove_dead_participants(tmp_path / "absent").segments == 0
