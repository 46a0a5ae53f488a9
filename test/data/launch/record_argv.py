"""Launch prefix for test_launcher_real_parity.py: ``record_argv.py FOLDER COMMAND...``.

Writes ``FOLDER/<pid>.json`` with the command's argv and the text of every ``--params-file`` it
names (launch_ros's generated files are temporary), then waits for SIGINT or SIGTERM and exits 0.
"""

import json
import os
import signal
import sys
from pathlib import Path

folder, argv = Path(sys.argv[1]), sys.argv[2:]
params = {}
for index, item in enumerate(argv[:-1]):
    if item == "--params-file":
        params[argv[index + 1]] = Path(argv[index + 1]).read_text()
# Keep each params file readable after the launcher deletes its temporary copies.
for index, item in enumerate(argv[:-1]):
    if item == "--params-file":
        copy = folder / f"{os.getpid()}-{index}.yaml"
        copy.write_text(params[argv[index + 1]])
        argv[index + 1] = str(copy)
partial = folder / f"{os.getpid()}.part"
partial.write_text(json.dumps({"argv": argv}))
partial.rename(folder / f"{os.getpid()}.json")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
try:
    signal.pause()
except KeyboardInterrupt:
    pass
