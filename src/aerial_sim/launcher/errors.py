"""The launcher's one exception type."""

from __future__ import annotations


class LaunchError(Exception):
    """A launch file, argument or executable problem, reported to the user as one line.

    The message names the culprit (file, tag, attribute, argument or package) so
    the command line can print it as-is and exit with status 2.
    """
