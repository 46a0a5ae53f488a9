"""Error helpers shared by the world modules (scene and material files)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from aerial_sim.config import ParamsError


@contextmanager
def located(where: str) -> Iterator[None]:
    """Re-raise a :class:`ParamsError` prefixed with ``where`` unless it already names it.

    ``params_from_mapping`` names the key path of a type error, but a check in a
    dataclass's ``__post_init__`` only knows the field; this adds the file and
    object, so every message reads ``urban.yaml: objects[3] 'pole_1'.radius: ...``.
    """
    try:
        yield
    except ParamsError as error:
        if str(error).startswith(where):
            raise
        raise ParamsError(f"{where}.{error}") from error
