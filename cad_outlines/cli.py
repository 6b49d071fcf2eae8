"""The ``cad-outlines`` command line."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

__all__ = ["main"]


def _analysis_package():
    """The repository's ``analysis/`` package (studies run from a source checkout)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "analysis" / "__init__.py").is_file():
        raise SystemExit("studies run from a source checkout of cad_outlines (analysis/ not found next to the package)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("analysis")


def _studies() -> dict[str, object]:
    try:
        pkg = _analysis_package()
    except SystemExit:
        return {}
    found = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"analysis.{info.name}")
        if hasattr(module, "run") and hasattr(module, "add_arguments"):
            found[info.name.replace("_", "-")] = module
    return found


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cad-outlines", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the main job on the embedded examples (no downloads)")
    from .demo import add_arguments as demo_args

    demo_args(demo)

    edit = sub.add_parser("edit", help="apply an edit to a file with a transformers model (Copy-as-Decode)")
    from .edit_cli import add_arguments as edit_args

    edit_args(edit)

    study = sub.add_parser("study", help="run a study from analysis/ and write its report into docs/results/")
    studies = study.add_subparsers(dest="study", required=True)
    for name, module in sorted(_studies().items()):
        p = studies.add_parser(name, help=getattr(module, "DESCRIPTION", ""))
        module.add_arguments(p)
        p.set_defaults(_study_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run

        return run(args)
    if args.command == "edit":
        from .edit_cli import run

        return run(args)
    if args.command == "study":
        return int(args._study_module.run(args) or 0)
    return 2


if __name__ == "__main__":
    sys.exit(main())
