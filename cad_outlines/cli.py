"""The ``cad-outlines`` command line.

User errors (a missing file, a grammar that does not compile, a bad program) print one
line naming what is at fault and exit with status 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from .cli_common import UserError, grammar_error_line, grammar_faults, load_tokenizer, one_line, user_errors

__all__ = ["main", "UserError", "load_tokenizer", "find_checkout"]

STUDIES_NEED_CHECKOUT = (
    "studies run from a source checkout of cad_outlines, with the shared data beside it: "
    "git clone the repository, `pip install -e .` in it, put the shared data folder at ../shared/data "
    "(or set CAD_OUTLINES_DATA), then run `python -m analysis NAME` (or `cad-outlines study NAME`) there")


def find_checkout(start: str | Path | None = None) -> Path | None:
    """The source checkout holding the current folder (or `start`): the nearest folder, going
    up, with both ``analysis/__init__.py`` and ``cad_outlines/``; None if there is none."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "analysis" / "__init__.py").is_file() and (folder / "cad_outlines").is_dir():
            return folder
    return None


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
    an.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="progress bars on stderr (default: only when stderr is a terminal)")

    study = sub.add_parser(
        "study", help="run a study from analysis/ (`python -m analysis NAME ...` in the source checkout holding the "
                      "current folder); it writes its report into docs/results/",
        description="Runs `python -m analysis NAME ARGS...` in the source checkout holding the current folder "
                    "(studies are not part of the installed package). `cad-outlines study NAME --help` lists a "
                    "study's options.")
    study.add_argument("name", nargs="?", help="the study (without it: the list of studies)")
    study.add_argument("rest", nargs=argparse.REMAINDER, help="the study's own options")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; user errors print one line on stderr and return 2."""
    args = _build_parser().parse_args(argv)
    try:
        return _run(args)
    except user_errors() as e:
        if getattr(args, "debug", False):
            raise
        print(f"cad-outlines {args.command}: error: {one_line(e)} (--debug for the traceback)", file=sys.stderr)
        return 2


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
        return _study(args)
    return 2


def _study(args) -> int:
    """``python -m analysis NAME ...`` as a subprocess in the checkout holding the current
    folder: the installed package never imports ``analysis/`` nor edits ``sys.path``."""
    checkout = find_checkout()
    if checkout is None:
        raise UserError(STUDIES_NEED_CHECKOUT + f" (no checkout holds {os.getcwd()})")
    cmd = [sys.executable, "-m", "analysis", *([args.name] if args.name else []), *args.rest]
    if getattr(args, "debug", False) and "--debug" not in args.rest:
        cmd.append("--debug")
    return subprocess.run(cmd, cwd=checkout).returncode


def _analyze(args) -> int:
    from .engine.vocabulary import Vocabulary
    from .edits.documents import read_document
    from .grammar_report import analyze_grammar
    from .grammars import grammar_source

    source = grammar_source(args.grammar)  # a missing grammar file fails here, before the tokenizer loads
    tokenizer = load_tokenizer(args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tokenizer)
    tokens = None
    if args.document:
        text = read_document(args.document)
        tokens = encode_exactly(vocab, tokenizer, text)
        if tokens is None:
            raise UserError(f"{args.document}: the tokenizer cannot spell the document byte for byte")
    try:
        report = analyze_grammar(args.grammar, vocab, start=args.start,
                                 document=args.document and Path(args.document).name, document_tokens=tokens,
                                 tokenizer_name=_tokenizer_name(args.tokenizer), cache=not args.no_cache,
                                 progress=args.progress)
    except grammar_faults() as e:  # lark's or a regex module's own error: one line naming the grammar
        raise grammar_error_line(e, source.text, source.name) from e
    files = report.save(args.out, f"{Path(source.name).stem}.analysis")
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
