"""What the client scripts beside this file share: one JSON line per result, and a call's error text.

Imported by a script run as ``python SCRIPT.py MODULE PORT`` (its folder is first on sys.path)."""

import json


def say(step, **values):
    """One JSON line ``{"step": step, ...}`` on stdout, flushed (the test reads them as they come)."""
    print(json.dumps({"step": step, **values}), flush=True)


def error_of(call):
    """The text of the error ``call()`` raised (the client raises the server's message), else None."""
    try:
        call()
    except Exception as error:  # a msgpackrpc RPCError
        return str(error)
    return None
