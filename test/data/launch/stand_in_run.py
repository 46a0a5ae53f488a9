"""Processes of test/data/launch/hang_after_landing.launch.yaml: ``lander RUN_DIR`` or ``stubborn RUN_DIR``."""

import json
import os
import signal
import sys
import time
from pathlib import Path

from aerial_sim import stack_dumps


def stuck_in_a_loop():
    while True:
        time.sleep(0.05)


def main(role: str, run_dir: str) -> int:
    stack_dumps.register()  # as every aerial_sim node process does at start
    if role == "lander":
        time.sleep(1.0)
        Path(run_dir, "metrics.json").write_text(json.dumps({"mission": {"name": "stand_in"}}))
        print("landed", flush=True)
        return 0
    first_attempt = "attempt-1" in os.environ.get(stack_dumps.STACKS_DIR_VARIABLE, "")
    if first_attempt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("stubborn: ignoring SIGINT and SIGTERM", flush=True)
        stuck_in_a_loop()
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
