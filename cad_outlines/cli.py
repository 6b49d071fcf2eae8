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
        try:
            module = importlib.import_module(f"analysis.{info.name}")
        except ImportError as e:  # e.g. the vLLM venv pins an older lark: that study is out, not the others
            found[info.name.replace("_", "-")] = _Unavailable(f"analysis.{info.name}", e)
            continue
        if hasattr(module, "run") and hasattr(module, "add_arguments"):
            found[info.name.replace("_", "-")] = module
    return found


class _Unavailable:
    """A study whose module does not import in this environment: says why when run."""

    def __init__(self, name: str, error: ImportError):
        self.name, self.error = name, error
        self.DESCRIPTION = f"(unavailable here: {type(error).__name__}: {error})"

    def add_arguments(self, parser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER)

    def run(self, args) -> int:
        raise SystemExit(f"{self.name} does not import in this environment: {type(self.error).__name__}: {self.error}")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cad-outlines", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the main job on the embedded examples (no downloads)")
    from .demo import add_arguments as demo_args

    demo_args(demo)

    edit = sub.add_parser("edit", help="apply an edit to a file with a transformers model (Copy-as-Decode)")
    from .edit_cli import add_arguments as edit_args

    edit_args(edit)

    an = sub.add_parser("analyze", help="grammar analysis report (streamlining) for a Lark grammar and a tokenizer")
    an.add_argument("grammar", help="a .lark file")
    an.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer folder (tokenizer.json)")
    an.add_argument("--start", default=None, help="start symbol (default: the grammar's first)")
    an.add_argument("--document", default=None, help="a text of the grammar's language: decoding is measured on it")
    an.add_argument("--out", default=".", help="folder for <grammar>.analysis.md/.json/.png (default: here)")
    an.add_argument("--no-cache", action="store_true", help="do not read or write the mask-store cache")

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
    if args.command == "analyze":
        return _analyze(args)
    if args.command == "study":
        return int(args._study_module.run(args) or 0)
    return 2


def _analyze(args) -> int:
    from transformers import AutoTokenizer

    from .engine.vocabulary import Vocabulary
    from .grammar_report import analyze_grammar

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tokenizer)
    tokens = None
    if args.document:
        text = Path(args.document).read_text(encoding="utf-8")
        tokens = list(tokenizer.encode(text, add_special_tokens=False))
        if b"".join(vocab.token_bytes[t] for t in tokens) != text.encode("utf-8"):
            raise SystemExit(f"{args.document}: the tokenizer does not spell the document byte for byte")
    report = analyze_grammar(args.grammar, vocab, start=args.start, document=args.document and Path(args.document).name,
                             document_tokens=tokens, tokenizer_name=Path(args.tokenizer).name,
                             cache=not args.no_cache)
    files = report.save(args.out, f"{Path(args.grammar).stem}.analysis")
    print(report.to_markdown())
    print("wrote " + ", ".join(map(str, files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
