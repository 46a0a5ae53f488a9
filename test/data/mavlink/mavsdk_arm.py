"""MAVSDK (native 4.x binding) finds the autopilot and arms it, nothing else: how long each took.

    python mavsdk_arm.py PORT

Listens on udpin://127.0.0.1:PORT and prints one JSON line per step ("connected", "arm", "done"); an arm
refused or timed out (``ActionError``) ends it non-zero with MAVSDK's result in the traceback.
"""

import asyncio
import json
import sys
import time

from mavsdk.asyncio import ComponentType, Configuration, Mavsdk
from mavsdk.asyncio.plugins.action import ActionAsync


def report(step, **values):
    print(json.dumps({"step": step, **values}), flush=True)


async def main(port: int) -> None:
    config = Configuration.create_with_component_type(ComponentType.GROUND_STATION)
    async with Mavsdk(config) as mavsdk:
        started = time.monotonic()
        await mavsdk.add_any_connection(f"udpin://127.0.0.1:{port}")
        drone = await mavsdk.first_autopilot(timeout_s=20.0)
        assert drone is not None, f"no autopilot found on udp port {port} within 20 s"
        report("connected", system_id=await drone.get_system_id(), after_s=time.monotonic() - started)
        asked = time.monotonic()
        await ActionAsync(drone).arm()
        report("arm", took_s=time.monotonic() - asked)
    report("done")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
