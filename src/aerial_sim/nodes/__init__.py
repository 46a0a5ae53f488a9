"""ROS 2 node adapters (one module per node executable).

Every node is its own single-threaded process, many to a machine. NumPy's BLAS
thread pool would make each of them spin a thread per core while it waits:
measured on the camera node (2 cores), rendering used 2.0 cores instead of 1.0
at the same 24 ms per frame. So node processes use one BLAS thread unless the
user says otherwise. This runs before any node module imports numpy.
"""

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# A node executable stops quietly on SIGINT/SIGTERM even while it is still importing,
# and dies with its launcher (aerial_sim.nodes.ros.process); test processes are left alone.
from aerial_sim.nodes.ros import process  # noqa: E402

if process.is_node_executable():
    process.start_node_process()
