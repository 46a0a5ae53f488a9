"""Shared by the benchmarks that start a ROS graph: the ROS domain it runs in.

``ROS_DOMAIN_ID`` when it is set (a benchmark is pointed at a domain that way), else a free id leased from
``AERIAL_SIM_DOMAIN_RANGE`` (default 1-101) as a batch run leases one (:mod:`aerial_sim.batch.domains`: an
``flock`` held for this process's life, ids whose DDS ports some other graph has bound skipped), so two
benchmarks, a test and a batch never share a graph. Ids above 101 are not chosen by default: with Fast DDS a
domain uses UDP ports 7400 + 250 * id and up, which from id 102 on fall in Linux's ephemeral port range
(32768-60999), where any program's outgoing sockets may already hold them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_leases: list = []  # held until this process exits


def private_domain() -> str:
    """This process's ``ROS_DOMAIN_ID`` (set in ``os.environ`` for it and the processes it starts)."""
    chosen = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if chosen:
        return chosen
    if str(REPO / "src") not in sys.path:
        sys.path.insert(0, str(REPO / "src"))
    from aerial_sim.batch.domains import DomainPool

    lease = DomainPool().acquire(timeout_s=60.0)
    _leases.append(lease)
    os.environ["ROS_DOMAIN_ID"] = str(lease.domain_id)
    return os.environ["ROS_DOMAIN_ID"]
