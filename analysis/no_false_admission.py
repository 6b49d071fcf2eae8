"""No false admissions (the streamlining blog's experiment 2): random walks over the engine's masks
(uniform among allowed tokens); every emitted prefix must be a legal prefix for lark
(decided by the independent checker in analysis/references) and every text ended by EOS must
parse."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import numpy as np

from .datasets import shared_data_dir
from .report import markdown_table, write_report

REPO = Path(__file__).resolve().parent.parent
DESCRIPTION = "random constrained walks: every prefix legal for lark, every EOS-ended text parses"

# name -> (grammar path relative to the shared data, start, Python indentation)
GRAMMARS = {
    "python": ("grammars/lark/python.lark", "file_input", True),
    "json": ("grammars/outlines/json.lark", None, False),
}


def add_arguments(parser) -> None:
    parser.add_argument("--grammar", action="append", choices=sorted(GRAMMARS), help="default: python and json")
    parser.add_argument("--tokenizer", default="qwen2.5")
    parser.add_argument("--chars", type=int, default=1_000_000, help="characters to emit per grammar")
    parser.add_argument("--max-walk", type=int, default=400, help="tokens per walk before starting a new one")
    parser.add_argument("--check-every", type=int, default=1, help="check every k-th prefix with the checker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", default=None)
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def run(args) -> int:
    import lark
    from lark.indenter import PythonIndenter
    from tqdm.auto import tqdm

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from analysis.references.legality_checker import LegalityChecker

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.matcher import Matcher
    from cad_outlines.engine.vocabulary import Vocabulary

    def report(final: bool, current: list | None = None):
        all_rows = rows + ([current] if current else [])
        table = markdown_table(["grammar", "walks", "ended by EOS", "tokens", "bytes emitted", "prefixes checked",
                                "illegal prefixes", "EOS texts lark rejects", "seconds"], all_rows)
        status = "" if final else "**Partial: this run was still going when this was written.**\n\n"
        body = (status + f"Tokenizer `{tdir.name}`. Each walk starts empty and picks uniformly among the tokens the "
                f"engine allows (EOS included) until EOS or {args.max_walk} tokens. Every {args.check_every}th prefix "
                f"(and the last of each walk) is checked by the independent checker (`analysis/references/legality_checker.py`: "
                f"lark's own lexer and parser plus automata for the lexeme in progress); every text ended by EOS must "
                f"parse with lark (basic lexer, PythonIndenter for Python). Masks from: {'; '.join(stores)}.\n\n"
                + table
                + ("\n\nProblems:\n" + "\n".join(problems[:50]) if problems else "\n\nNo problems."))
        cmd = shlex.join(["cad-outlines", "study", "no-false-admission", "--tokenizer", args.tokenizer, "--chars",
                          str(args.chars), "--check-every", str(args.check_every)])
        path = write_report(args.out_dir, "no_false_admission", "No false admissions (random constrained walks)",
                            body, cmd)
        return table, path

    data = shared_data_dir()
    tdir = Path(args.tokenizer) if Path(args.tokenizer).exists() else data / "tokenizers" / args.tokenizer
    vocab = Vocabulary.from_tokenizer(tdir)
    eos = set(vocab.eos_token_ids)
    rows, problems = [], []
    stores: list[str] = []
    for name in args.grammar or ["python", "json"]:
        rel, start, indent = GRAMMARS[name]
        gpath = data / rel
        compiled = compile_grammar(gpath, vocab, start=start, cache=args.cache or True).load_objects()
        stores.append(f"{name}: {'streamlined' if compiled.streamlined else 'unstreamlined'} mask store "
                      f"({compiled.store.n_rows:,} rows)")
        postlex = PythonIndenter() if indent else None
        checker = LegalityChecker(gpath.read_text(), start=start, import_paths=[str(gpath.parent)],
                                  postlex=PythonIndenter() if indent else None)
        options = dict(parser="lalr", lexer="basic", import_paths=[str(gpath.parent)])
        if start:
            options["start"] = start
        if postlex:
            options["postlex"] = postlex
        parser = lark.Lark(gpath.read_text(), **options)
        rng = np.random.default_rng(args.seed)
        stats = dict(walks=0, eos_walks=0, tokens=0, chars=0, checked=0, illegal=0, unparsed=0)
        t0 = last = time.perf_counter()
        bar = tqdm(total=args.chars, unit="char", desc=f"walks {name}", mininterval=1.0)
        def row():
            return [name, stats["walks"], stats["eos_walks"], stats["tokens"], stats["chars"], stats["checked"],
                    stats["illegal"], stats["unparsed"], f"{time.perf_counter() - t0:.0f}"]

        while stats["chars"] < args.chars:
            if time.perf_counter() - last > 120:
                report(False, row())
                last = time.perf_counter()
            stats["walks"] += 1
            matcher, text = Matcher(compiled), b""
            for step in range(args.max_walk):
                allowed = np.flatnonzero(matcher.allowed_mask())
                if not len(allowed):
                    problems.append(f"- {name}: no allowed token after {text[-60:]!r}")
                    break
                tok = int(rng.choice(allowed))
                if tok in eos:
                    stats["eos_walks"] += 1
                    try:
                        parser.parse(text.decode("utf-8"))
                    except (lark.exceptions.LarkError, UnicodeDecodeError) as e:
                        stats["unparsed"] += 1
                        problems.append(f"- {name}: EOS-ended text does not parse ({type(e).__name__}): {text[-80:]!r}")
                    break
                matcher.advance(tok)
                piece = vocab.token_bytes[tok]
                text += piece
                stats["tokens"] += 1
                stats["chars"] += len(piece)
                bar.update(len(piece))
                if stats["tokens"] % args.check_every == 0 or step == args.max_walk - 1:
                    stats["checked"] += 1
                    if not checker.is_legal_prefix(text):
                        stats["illegal"] += 1
                        problems.append(f"- {name}: illegal prefix after token {tok}: {text[-80:]!r}")
                        break
        bar.close()
        rows.append(row())
    table, path = report(True)
    print(table)
    print(f"wrote {path}")
    return 0 if not problems else 1
