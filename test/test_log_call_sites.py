"""A logger call site keeps one severity: rclpy remembers each call site's severity (file, line, bytecode
offset) and raises ``ValueError: Logger severity cannot be changed between calls`` the second time one
logs at another, so ``(log.info if ok else log.error)(why)`` works once and then breaks the node that
logs there again (a kept mission that ended one run failed and the next landed lost its odometry
callback that way). The package's sources are read with ``ast``: no such call or ``log = a if c else b``
is left."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "aerial_sim"
SEVERITIES = {"debug", "info", "warning", "warn", "error", "fatal"}


def picks_a_severity(node: ast.AST) -> bool:
    """``a.info if c else a.error`` (or ``x or y``) between logger methods of different severities."""
    if isinstance(node, ast.IfExp):
        branches = (node.body, node.orelse)
    elif isinstance(node, ast.BoolOp):
        branches = tuple(node.values)
    else:
        return False
    names = {b.attr for b in branches if isinstance(b, ast.Attribute) and b.attr in SEVERITIES}
    return len(names) > 1


def mixed_severity_sites(source: str, filename: str = "<source>") -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Call) and picks_a_severity(node.func):
            found.append(f"{filename}:{node.lineno}: calls a logger method chosen by a condition")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and picks_a_severity(node.value):
            found.append(f"{filename}:{node.lineno}: keeps a logger method chosen by a condition")
    return found


def test_no_logger_call_site_logs_at_two_severities():
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        text = path.read_text()
        if "get_logger" in text:
            found += mixed_severity_sites(text, str(path.relative_to(PACKAGE_DIR)))
    assert not found, "one call site per severity (if ok: log.info(why) else: log.error(why)):\n" + "\n".join(found)


def test_the_check_sees_a_chosen_severity():
    assert mixed_severity_sites("(self.get_logger().info if code == 0 else self.get_logger().error)(why)")
    assert mixed_severity_sites("log = logger.info if ok else logger.warning\nlog(why)")
    assert not mixed_severity_sites("if ok:\n    logger.info(why)\nelse:\n    logger.error(why)")
    assert not mixed_severity_sites("(logger.info if ok else logger.info)(why)")  # one severity
