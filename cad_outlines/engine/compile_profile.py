"""Where a grammar's compile spends its time and memory: a per-phase record (wall and CPU
seconds, peak resident memory) filled in by :func:`~cad_outlines.engine.compile.compile_grammar`
and shown as one progress bar over the phases, whose total is fixed when the compile starts.

Peak RSS is the process's ``VmHWM``. With ``per_phase_peaks`` the high-water mark is reset
(``/proc/self/clear_refs``) at the start of every phase, so each phase's peak is its own;
leave it off where a caller reads the process's overall peak afterwards (a benchmark).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Phase", "CompileProfile", "COLD_PHASES", "peak_rss_mib"]

# The phases of a cold, streamlined compile, in order (the progress bar's total). A compile with
# streamline=False saves its raw store ("save store") instead of the streamlining phases.
COLD_PHASES = ("lark load", "terminal DFAs", "parse tables", "lexer configurations",
               "token-level index", "store rows", "grammar analysis", "streamline: interchangeable",
               "streamline: one-hop successors", "streamline: pairwise always/never",
               "streamline: whole sequences", "streamline: merge sets", "save streamlined store", "flat arrays")


def _status(key: str) -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def peak_rss_mib() -> float:
    """The process's peak resident set so far (``VmHWM``), MiB; NaN where unknown."""
    return _status("VmHWM")


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


@dataclass
class Phase:
    name: str
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time (a forked helper's is not counted)
    peak_rss_mib: float  # VmHWM at the phase's end (its own peak with per_phase_peaks)
    note: str = ""


@dataclass
class CompileProfile:
    """Phases of one compile, in the order they ran."""

    per_phase_peaks: bool = False
    phases: list[Phase] = field(default_factory=list)
    memory: bool = True  # read the peak RSS after each phase (a file read: off for compiles nobody profiles)
    _bar: object = field(default=None, repr=False)

    # -- recording --------------------------------------------------------------------
    def start(self, progress: bool, planned: int = len(COLD_PHASES)) -> None:
        """Open the phase bar (total: `planned`, the phases of a cold compile; phases a
        cache makes unnecessary are skipped over, so the total never moves)."""
        if progress:
            from tqdm.auto import tqdm

            # asked for (compile_grammar decides: progress=None draws it only on a terminal)
            self._bar = tqdm(desc="compile", total=planned, unit="phase", leave=False)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.update(self._bar.total - self._bar.n)
            self._bar.close()
            self._bar = None

    def skip(self, n: int) -> None:
        """Phases that will not run (a cached store): the bar moves past them."""
        if self._bar is not None:
            self._bar.update(min(n, self._bar.total - self._bar.n))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._bar is not None:
            self._bar.set_postfix_str(name)
        if self.per_phase_peaks:
            _reset_peak()
        t0, c0 = time.perf_counter(), time.process_time()
        yield
        self.add(name, time.perf_counter() - t0, time.process_time() - c0)

    def add(self, name: str, seconds: float, cpu_seconds: float, note: str = "") -> None:
        """A phase measured by its caller (phases that interleave, like the token-level
        index and the store's rows)."""
        self.phases.append(Phase(name, seconds, cpu_seconds, peak_rss_mib() if self.memory else float("nan"), note))
        if self._bar is not None:
            self._bar.update(1)
        if self.per_phase_peaks:
            _reset_peak()

    def step_printer(self, inner: Callable[[str], None] | None = None) -> Callable[[str], None]:
        """A progress callback for :func:`~cad_outlines.engine.store.streamline.streamline`:
        each step's "<step>: N rows" message closes a phase "streamline: <step>"."""
        mark = [time.perf_counter(), time.process_time()]

        def say(msg: str) -> None:
            if inner is not None:
                inner(msg)
            if msg.endswith("rows"):
                now = (time.perf_counter(), time.process_time())
                self.add("streamline: " + msg.split(":")[0], now[0] - mark[0], now[1] - mark[1], msg.split(": ")[-1])
                mark[:] = now

        say.mark = mark  # type: ignore[attr-defined]
        return say

    # -- reading ----------------------------------------------------------------------
    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds for p in self.phases)

    @property
    def peak_rss_mib(self) -> float:
        return max((p.peak_rss_mib for p in self.phases), default=float("nan"))

    def to_dict(self) -> dict:
        return {"phases": [asdict(p) for p in self.phases], "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "peak_rss_mib": self.peak_rss_mib}

    def markdown_table(self) -> list[str]:
        peak = "peak RSS MiB (own)" if self.per_phase_peaks else "peak RSS MiB so far"
        lines = [f"| phase | wall s | CPU s | {peak} | note |", "|---|---|---|---|---|"]
        for p in self.phases:
            lines.append(f"| {p.name} | {p.seconds:.2f} | {p.cpu_seconds:.2f} | {p.peak_rss_mib:.0f} | {p.note} |")
        lines.append(f"| **total** | **{self.seconds:.2f}** | **{self.cpu_seconds:.2f}** | "
                     f"**{self.peak_rss_mib:.0f}** | |")
        return lines
