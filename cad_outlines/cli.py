"""The ``cad-outlines`` command line.

User errors (a missing file, a grammar that does not compile, a bad program) print one
line naming what is at fault and exit with status 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from .errors import CadOutlinesError

__all__ = ["main", "UserError", "load_tokenizer"]

STUDIES_NEED_CHECKOUT = (
    "studies run from a source checkout of cad_outlines, with the shared data beside it: "
    "git clone the repository, `pip install -e .` in it, put the shared data folder at ../shared/data "
    "(or set CAD_OUTLINES_DATA), then run `cad-outlines study NAME` there")


class UserError(CadOutlinesError):
    """A mistake in the command's input: reported as one line, exit status 2."""


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input, not a bug: one line, no traceback (``--debug`` shows it)."""
    import lark

    from .edits import IncompleteProgramError, ProgramSyntaxError, SpanError
    from .engine.matcher import InvalidTokenError
    from .engine.frontend.terminals import GrammarCompileError
    from .generators.copy_decode import ContextLengthError

    return (UserError, ContextLengthError, OSError, UnicodeDecodeError, GrammarCompileError, lark.exceptions.GrammarError,
            lark.exceptions.LexError, ProgramSyntaxError, SpanError, IncompleteProgramError, InvalidTokenError)


def load_tokenizer(path: str | Path):
    """A transformers tokenizer from a folder, or from a ``tokenizer.json`` /
    ``tokenizer.model`` file (its folder is loaded); a missing path or a folder with no
    tokenizer is a :class:`UserError`, not a hub lookup."""
    from transformers import AutoTokenizer

    p = Path(path)
    if not p.exists():
        raise UserError(f"tokenizer {str(path)!r}: no such file or folder")
    folder = p if p.is_dir() else p.parent
    names = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")
    if not any((folder / n).is_file() for n in names):
        raise UserError(f"tokenizer {str(path)!r}: no {', '.join(names[:2])} or tokenizer_config.json in "
                        f"{str(folder)!r}")
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except (ImportError, ValueError) as e:
        if (folder / "tokenizer.model").is_file() and not (folder / "tokenizer.json").is_file():
            raise UserError(f"tokenizer {str(path)!r}: reading tokenizer.model needs the sentencepiece and "
                            f"protobuf packages (pip install sentencepiece protobuf): {e}") from e
        raise UserError(f"tokenizer {str(path)!r}: transformers cannot load it: {e}") from e


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


def _version() -> str:
    from ._version import __version__

    return __version__


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cad-outlines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")

    def with_debug(**kw) -> argparse.ArgumentParser:
        return argparse.ArgumentParser(parents=[common], **kw)

    sub = parser.add_subparsers(dest="command", required=True, parser_class=with_debug)

    demo = sub.add_parser("demo", help="the main job on the embedded examples (no downloads)")
    from .demo import add_arguments as demo_args

    demo_args(demo)

    edit = sub.add_parser("edit", help="apply an edit to a file with a transformers model (Copy-as-Decode)")
    from .edit_cli import add_arguments as edit_args

    edit_args(edit)

    an = sub.add_parser("analyze", help="grammar analysis report (streamlining) for a Lark grammar and a tokenizer")
    an.add_argument("grammar", help="a .lark file, or a shipped grammar's name (json, python, sql, copy_edit)")
    an.add_argument("--tokenizer", required=True,
                    help="a Hugging Face tokenizer folder, or its tokenizer.json / tokenizer.model")
    an.add_argument("--start", default=None,
                    help="start rule (default: the one the grammar names in a `// cad_outlines: start=NAME` line, "
                         "else `start`)")
    an.add_argument("--document", default=None, help="a text of the grammar's language: decoding is measured on it")
    an.add_argument("--out", default=".", help="folder for <grammar>.analysis.md/.json/.png (default: here)")
    an.add_argument("--no-cache", action="store_true", help="do not read or write the mask-store cache")

    study = sub.add_parser("study", help="run a study from analysis/ and write its report into docs/results/ "
                                         "(from a source checkout)")
    found = _studies()
    if not found:  # an installed wheel: no analysis/ package
        study.add_argument("name", nargs="?", help="the study (they run from a source checkout)")
        study.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        study.set_defaults(_study_module=None)
        return parser
    studies = study.add_subparsers(dest="study", required=True, parser_class=with_debug)
    for name, module in sorted(found.items()):
        p = studies.add_parser(name, help=getattr(module, "DESCRIPTION", ""))
        module.add_arguments(p)
        p.set_defaults(_study_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; user errors print one line on stderr and return 2."""
    args = _build_parser().parse_args(argv)
    try:
        return _run(args)
    except _user_errors() as e:
        if getattr(args, "debug", False):
            raise
        print(f"cad-outlines {args.command}: error: {_one_line(e)} (--debug for the traceback)", file=sys.stderr)
        return 2


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())


def _run(args) -> int:
    if args.command == "demo":
        from .demo import run

        return run(args)
    if args.command == "edit":
        from .edit_cli import run

        return run(args)
    if args.command == "analyze":
        return _analyze(args)
    if args.command == "study":
        if args._study_module is None:
            raise UserError(STUDIES_NEED_CHECKOUT)
        return int(args._study_module.run(args) or 0)
    return 2


def _analyze(args) -> int:
    from .engine.vocabulary import Vocabulary
    from .grammar_report import analyze_grammar
    from .grammars import grammar_source

    name = grammar_source(args.grammar).name  # a missing grammar file fails here, before the tokenizer loads
    tokenizer = load_tokenizer(args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tokenizer)
    tokens = None
    if args.document:
        text = Path(args.document).read_text(encoding="utf-8")
        tokens = encode_exactly(vocab, tokenizer, text)
        if tokens is None:
            raise UserError(f"{args.document}: the tokenizer cannot spell the document byte for byte")
    report = analyze_grammar(args.grammar, vocab, start=args.start, document=args.document and Path(args.document).name,
                             document_tokens=tokens, tokenizer_name=_tokenizer_name(args.tokenizer),
                             cache=not args.no_cache)
    files = report.save(args.out, f"{Path(name).stem}.analysis")
    print(report.to_markdown())
    print("wrote " + ", ".join(map(str, files)))
    return 0


def _tokenizer_name(path: str) -> str:
    p = Path(path).resolve()
    return p.parent.name if p.is_file() else p.name


def encode_exactly(vocab, tokenizer, text: str) -> list[int] | None:
    """Token ids spelling `text` byte for byte: the tokenizer's own encoding where it does
    (byte-level BPE), else greedy longest match over the vocabulary's bytes (a
    SentencePiece tokenizer adds a word-start space); None if no token spells some byte."""
    tokens = list(tokenizer.encode(text, add_special_tokens=False))
    data = text.encode("utf-8")
    if b"".join(vocab.token_bytes[t] for t in tokens) == data:
        return tokens
    by_bytes: dict[bytes, int] = {}
    for i, b in enumerate(vocab.token_bytes):
        if b and i not in vocab.special_ids:
            by_bytes.setdefault(b, i)
    longest = max(map(len, by_bytes))
    out, pos = [], 0
    while pos < len(data):
        for n in range(min(longest, len(data) - pos), 0, -1):
            tok = by_bytes.get(data[pos:pos + n])
            if tok is not None:
                out.append(tok)
                pos += n
                break
        else:
            return None
    return out


if __name__ == "__main__":  # run the package's module, so its exception classes are the ones raised
    from cad_outlines.cli import main as _main

    sys.exit(_main())
