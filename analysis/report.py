"""Writing study reports: Markdown tables, the machine they ran on, plots."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

__all__ = ["markdown_table", "environment", "write_report", "pct"]


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return _checkout_version() if pkg == "cad-outlines" else "-"


def _checkout_version() -> str:
    """cad_outlines imported from a source checkout (not installed): its version and commit."""
    import subprocess

    try:
        import cad_outlines
    except ImportError:
        return "-"
    root = Path(cad_outlines.__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{cad_outlines.__version__} (source checkout{' ' + sha if sha else ''})"


def environment(packages: Sequence[str] = ("cad-outlines", "tokenizers", "transformers", "torch")) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(f"{p} {_version(p)}" for p in packages)
    return (f"Machine: {cpu}, {os.cpu_count()} cores{_load()}; Python {sys.version.split()[0]}; {versions}; "
            f"run {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC.")


def _load() -> str:
    """The load average when the report is written (its 15-minute figure covers most of a
    long study: other work sharing the cores slows what was timed)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return ""
    return f" (load average {one:.2f} / {five:.2f} / {fifteen:.2f} over 1 / 5 / 15 min when written)"


def write_report(out_dir: str | Path, name: str, title: str, body: str, command: str) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.md"
    path.write_text(f"# {title}\n\nReproduce: `{command}`\n\n{environment()}\n\n{body.strip()}\n", encoding="utf-8")
    return path
