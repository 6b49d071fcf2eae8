"""``python -m analysis NAME [options]``: run one study from a source checkout.

Every module of this package with ``add_arguments(parser)`` and ``run(args)`` is a study,
named as its module with ``-`` for ``_`` (``engine_bench`` -> ``engine-bench``).
``cad-outlines study NAME ...`` runs this same command in the checkout holding the current
folder. A mistake in the input (the library's own errors, a missing file) prints one line
and exits with status 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path


class _Unavailable:
    """A study whose module does not import in this environment: says why when run."""

    def __init__(self, name: str, error: ImportError):
        self.name, self.error = name, error
        self.DESCRIPTION = f"(unavailable here: {type(error).__name__}: {error})"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER)

    def run(self, args: argparse.Namespace) -> int:
        raise SystemExit(f"{self.name} does not import in this environment: {type(self.error).__name__}: {self.error}")


def studies() -> dict[str, object]:
    """Study name -> its module (or an :class:`_Unavailable` saying why it does not import)."""
    found: dict[str, object] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).resolve().parent)]):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"analysis.{info.name}")
        except ImportError as e:  # e.g. the vLLM venv pins an older lark: that study is out, not the others
            found[info.name.replace("_", "-")] = _Unavailable(f"analysis.{info.name}", e)
            continue
        if hasattr(module, "run") and hasattr(module, "add_arguments"):
            found[info.name.replace("_", "-")] = module
    return found


def build_parser() -> argparse.ArgumentParser:
    """The parser: one subcommand per study, each with its own options and ``--debug``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    parser = argparse.ArgumentParser(prog="python -m analysis",
                                     description="Run a study; it prints its table and writes docs/results/<study>.md.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="study", required=True, metavar="NAME")
    for name, module in sorted(studies().items()):
        p = sub.add_parser(name, parents=[common], help=getattr(module, "DESCRIPTION", ""))
        module.add_arguments(p)
        p.set_defaults(_study_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the study named in `argv`; the library's errors print one line and return 2."""
    from cad_outlines.cli_common import one_line, user_errors

    args = build_parser().parse_args(argv)
    try:
        return int(args._study_module.run(args) or 0)
    except user_errors() as e:
        if getattr(args, "debug", False):
            raise
        print(f"python -m analysis {args.study}: error: {one_line(e)} (--debug for the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
