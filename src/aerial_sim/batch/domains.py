"""ROS domain ids for concurrent runs: each run holds one id, no two runs on a host share one.

An id is held by an exclusive ``flock`` on ``<lock dir>/<id>.lock`` for the run's
whole life, so concurrent runs of one ``aerial_sim batch``, of two at once, or of
a batch and a Ray worker on the same host never get the same id, and an id is
freed the moment its holder exits, however it exits (the kernel drops the lock).
An id whose DDS ports are already bound by some other program (a ROS graph not
started by a batch) is skipped too.

- Range: ``AERIAL_SIM_DOMAIN_RANGE`` (``60-79``, or one id), default 1-101.
  With Fast DDS a domain d uses UDP ports 7400 + 250·d ... + 249, so ids above
  101 collide with the ephemeral port range on Linux (ROS 2 docs, "The ROS_DOMAIN_ID"): a range
  reaching above it is used, with one warning line per process saying so;
  232 is the largest valid id.
- Lock directory: ``AERIAL_SIM_LOCK_DIR``, else ``$XDG_RUNTIME_DIR/aerial_sim/domains``,
  else ``/tmp/aerial_sim-<uid>/domains`` (per user, on the local disk: flock
  is only reliable on a local filesystem).
"""

from __future__ import annotations

import fcntl
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

RANGE_ENV = "AERIAL_SIM_DOMAIN_RANGE"
LOCK_DIR_ENV = "AERIAL_SIM_LOCK_DIR"
DEFAULT_RANGE = range(1, 102)
MAX_DOMAIN_ID = 232
#: The largest id whose Fast DDS ports (7400 + 250·id + 10 + 2·participant) stay below Linux's ephemeral range
#: (32768-60999 by default; ROS 2 docs, "The ROS_DOMAIN_ID").
SAFE_MAX_DOMAIN_ID = 101
_warned_ranges: set[str] = set()
#: RTPS port mapping (OMG DDSI-RTPS 9.6.1.1): PB + DG·domain, DG = 250 ports per domain.
PORT_BASE, DOMAIN_GAIN = 7400, 250


class DomainRangeError(ValueError):
    """``AERIAL_SIM_DOMAIN_RANGE`` is not ``LOW-HIGH`` within 0..232."""


class NoDomainAvailable(RuntimeError):
    """Every id of the range stayed taken until the timeout."""


def parse_domain_range(text: str | None) -> range:
    """``'60-79'`` -> range(60, 80); ``'7'`` -> range(7, 8); None or '' -> the default 1-101."""
    if not text or not text.strip():
        return DEFAULT_RANGE
    low_text, sep, high_text = text.strip().partition("-")
    try:
        low = int(low_text)
        high = int(high_text) if sep else low
    except ValueError as error:
        raise DomainRangeError(f"{RANGE_ENV}={text!r}: expected LOW-HIGH, e.g. 60-79") from error
    if not 0 <= low <= high <= MAX_DOMAIN_ID:
        raise DomainRangeError(f"{RANGE_ENV}={text!r}: expected 0 <= LOW <= HIGH <= {MAX_DOMAIN_ID}")
    if high > SAFE_MAX_DOMAIN_ID and text not in _warned_ranges:  # allowed, but said once per process
        _warned_ranges.add(text)
        print(f"warning: {RANGE_ENV}={text}: domain ids above {SAFE_MAX_DOMAIN_ID} put DDS's UDP ports "
              f"(7400 + 250·id and up) into Linux's ephemeral port range (32768-60999), where any program's outgoing "
              f"socket may already hold them: keep the range within 0-{SAFE_MAX_DOMAIN_ID}", file=sys.stderr)
    return range(low, high + 1)


def default_lock_dir() -> Path:
    if os.environ.get(LOCK_DIR_ENV):
        return Path(os.environ[LOCK_DIR_ENV])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "aerial_sim" / "domains"
    return Path(tempfile.gettempdir()) / f"aerial_sim-{os.getuid()}" / "domains"


def domain_ports(domain_id: int) -> range:
    """The UDP ports DDS participants of ``domain_id`` bind (discovery and user traffic)."""
    start = PORT_BASE + DOMAIN_GAIN * domain_id
    return range(start, start + DOMAIN_GAIN)


def bound_udp_ports(tables: Iterable[str] = ("/proc/net/udp", "/proc/net/udp6")) -> set[int]:
    """Local UDP ports bound on this host (Linux ``/proc/net/udp*``; empty where unreadable)."""
    ports: set[int] = set()
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1 and ":" in fields[1]:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def domain_in_use_by_others(domain_id: int) -> bool:
    """True when some process already has DDS ports of ``domain_id`` bound."""
    return not bound_udp_ports().isdisjoint(domain_ports(domain_id))


class DomainLease:
    """One held domain id; release it (or leave the ``with`` block) when the run has ended."""

    def __init__(self, domain_id: int, handle):
        self.domain_id = domain_id
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file drops the flock
            self._handle = None

    def __enter__(self) -> "DomainLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"DomainLease({self.domain_id})"


class DomainPool:
    """Hands out domain ids of ``ids`` that no other holder on this host has."""

    def __init__(
        self,
        ids: range | None = None,
        lock_dir: Path | None = None,
        in_use: Callable[[int], bool] = domain_in_use_by_others,
    ):
        self.ids = parse_domain_range(os.environ.get(RANGE_ENV)) if ids is None else ids
        self.lock_dir = lock_dir or default_lock_dir()
        self.in_use = in_use

    def try_acquire(self) -> DomainLease | None:
        """Lock a free id, starting at a random one (spreads concurrent batches); None if all are taken."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        ids = list(self.ids)
        start = random.randrange(len(ids))
        for domain_id in ids[start:] + ids[:start]:
            handle = open(self.lock_dir / f"{domain_id}.lock", "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            if self.in_use(domain_id):
                handle.close()
                continue
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            return DomainLease(domain_id, handle)
        return None

    def acquire(self, timeout_s: float | None = None, poll_s: float = 0.25, cancelled: Callable[[], bool] = lambda: False) -> DomainLease:
        """Wait for a free id (forever, or ``timeout_s``); NoDomainAvailable if none frees up."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            lease = self.try_acquire()
            if lease is not None:
                return lease
            if cancelled() or (deadline is not None and time.monotonic() >= deadline):
                raise NoDomainAvailable(
                    f"no free ROS domain id in {self.ids.start}-{self.ids.stop - 1} (set {RANGE_ENV} to widen it)"
                )
            time.sleep(poll_s)
