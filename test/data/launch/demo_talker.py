"""Demo node for the launcher and topics tests, installed as `lib/demo_pkg/talker` in a temp prefix.

Arguments before --ros-args choose what it does:
  (none)            publish std_msgs/String '<greeting> <n>' on `chatter` at `rate_hz` (parameters)
  --fail-after S    sleep S seconds, print a line on stdout and one on stderr, exit with status 1
  --exit-after S    sleep S seconds, print 'done', exit 0 (no rclpy, so it starts fast)
  --slow-stop S     wait for SIGINT, then spend S seconds on 'shutdown work' (SIGTERM, Python's
                    default, ends it), print 'stopped after slow work', exit 0
Ctrl-C (SIGINT) ends --exit-after and publishing with a line saying so and status 0.
"""

import sys
import time

own_args = sys.argv[1 : sys.argv.index("--ros-args")] if "--ros-args" in sys.argv else sys.argv[1:]

if "--fail-after" in own_args:
    time.sleep(float(own_args[own_args.index("--fail-after") + 1]))
    print("talker: about to fail", flush=True)
    print("boom: simulated failure", file=sys.stderr, flush=True)
    sys.exit(1)

if "--slow-stop" in own_args:
    import signal

    print("waiting for SIGINT", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    print("stopping slowly", flush=True)
    time.sleep(float(own_args[own_args.index("--slow-stop") + 1]))
    print("stopped after slow work", flush=True)
    sys.exit(0)

if "--exit-after" in own_args:
    try:
        time.sleep(float(own_args[own_args.index("--exit-after") + 1]))
    except KeyboardInterrupt:
        print("interrupted by SIGINT", flush=True)
        sys.exit(0)
    print("done", flush=True)
    sys.exit(0)

import rclpy  # noqa: E402
from rclpy.executors import ExternalShutdownException  # noqa: E402
from rclpy.node import Node  # noqa: E402
from std_msgs.msg import String  # noqa: E402

rclpy.init(args=sys.argv)
node = Node("talker")
greeting = node.declare_parameter("greeting", "hello").value
rate_hz = float(node.declare_parameter("rate_hz", 20.0).value)
publisher = node.create_publisher(String, "chatter", 10)
count = 0


def tick():
    global count
    count += 1
    publisher.publish(String(data=f"{greeting} {count}"))


node.create_timer(1.0 / rate_hz, tick)
print(f"talker ready as {node.get_fully_qualified_name()} on {publisher.topic_name}", flush=True)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
finally:
    node.destroy_node()
    rclpy.try_shutdown()
print("talker stopped cleanly", flush=True)
