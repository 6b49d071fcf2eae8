"""The compiled decode-time core (C++17, nanobind): see docs/engine_runtime.md.

``pip install .`` builds it. In a source checkout used without an install,
``python -m cad_outlines._native.build`` builds it in place.
"""

from __future__ import annotations

import functools
from types import ModuleType

__all__ = ["core"]


@functools.cache
def core() -> ModuleType:
    """The extension module, or an ImportError that says how to build it."""
    try:
        from . import _core
    except ImportError as e:
        raise ImportError(
            "cad_outlines' compiled core (cad_outlines._native._core) is not built: install the package with "
            "`pip install .` (needs a C++17 compiler), or build it in place in a source checkout with "
            f"`python -m cad_outlines._native.build` ({e})"
        ) from e
    return _core
