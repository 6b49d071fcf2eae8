"""Per-phase [wall, CPU] seconds of a store build, added into a caller's dict: the one clock the
native and the reference store builders share (the compile profile reads what they add)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["phase_clock"]


@contextmanager
def phase_clock(into: dict | None, name: str) -> Iterator[None]:
    """Adds the [wall, CPU] seconds of the block to ``into[name]``; does nothing where `into` is None.
    The time is added even when the block raises (a compile cut off by its deadline still reports it)."""
    if into is None:
        yield
        return
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        acc = into.setdefault(name, [0.0, 0.0])
        acc[0] += time.perf_counter() - t0
        acc[1] += time.process_time() - c0
