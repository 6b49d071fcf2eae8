"""Build the compiled core in place (for a source checkout used without ``pip install``):
``python -m cad_outlines._native.build``. Needs cmake, a C++17 compiler and nanobind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    build = root / "build" / "native-dev"
    subprocess.run(["cmake", "-S", str(root), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython_EXECUTABLE={sys.executable}"], check=True)
    subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)], check=True)


if __name__ == "__main__":
    main()
