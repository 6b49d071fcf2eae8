"""Native core vs the pure-Python reference matcher: identical masks, position by position.

1. **stdlib proof**: teacher-force stdlib Python (files lark's python.lark parses) with Qwen2.5 through
   :class:`~cad_outlines.engine.reference.matcher.ReferenceMatcher` (the original Python runtime) and the
   native :class:`~cad_outlines.engine.matcher.Matcher` on the same compiled grammar; compare the whole mask
   (EOS included) at every position, and time both.
2. **walks**: random constrained walks (GPT-2) over every grammar in the shared data the engine accepts,
   comparing both masks at every state.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

from .report import markdown_table, write_report
from .streamlining import MAIN, REPO, _data, _path, stdlib_proof, walk_grammars, walks

DESCRIPTION = "native core vs the Python reference matcher: identical masks on stdlib Python and walks of every grammar"


def add_arguments(parser) -> None:
    parser.add_argument("--proof-tokens", type=int, default=100_000, help="stdlib Python tokens (Qwen2.5)")
    parser.add_argument("--walk-states", type=int, default=2000, help="random-walk states per grammar")
    parser.add_argument("--walk-tokenizer", default="gpt2")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def run(args) -> int:
    from tokenizers import Tokenizer

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.matcher import Matcher
    from cad_outlines.engine.reference.matcher import ReferenceMatcher
    from cad_outlines.engine.vocabulary import Vocabulary

    data = _data()
    started = time.perf_counter()
    factories = (ReferenceMatcher, Matcher)
    sections, ok = [], True
    # 1. stdlib Python x Qwen2.5
    if args.proof_tokens:
        tdir = data / "tokenizers" / "qwen2.5"
        vocab = Vocabulary.from_tokenizer(tdir)
        tok = Tokenizer.from_file(str(tdir / "tokenizer.json"))
        gpath = _path(MAIN["python"][0], data)
        grammar = compile_grammar(gpath, vocab, start="file_input", progress=True)
        grammar.load_objects()  # the reference matcher's Python objects, built before timing
        gc.collect()
        gc.freeze()
        proof, files = stdlib_proof(grammar, grammar, tok, gpath, args.proof_tokens, "stdlib: reference vs native",
                                    factories)
        ok &= proof.equal == proof.positions
        r, n = proof.stats("original"), proof.stats("streamlined")
        sections.append("## stdlib Python x Qwen2.5\n\n" + markdown_table(
            ["files", "positions", "identical masks", "reference mean us", "native mean us", "reference p50",
             "native p50", "reference p99", "native p99", "reference max", "native max"],
            [[files, f"{proof.positions:,}", f"{proof.equal:,}/{proof.positions:,}", r[2], n[2], r[3], n[3], r[4], n[4],
              r[5], n[5]]])
            + ("" if not proof.first_difference else f"\n\nFirst difference: {proof.first_difference}")
            + "\n\nTimes are `allowed_mask()` (the bool form, which unpacks the native bitmask) for both, measured "
              "in the same loop with the order alternating per position.")
        gc.unfreeze()
    # 2. walks over every accepted grammar
    if args.walk_states:
        tdir = data / "tokenizers" / args.walk_tokenizer
        vocab = Vocabulary.from_tokenizer(tdir)
        rows, refused = [], []
        for p, rel, start in walk_grammars(data):
            print(f"== walks {rel}", flush=True)
            try:
                g = compile_grammar(p, vocab, start=start, progress=False).load_objects()
            except Exception as e:  # noqa: BLE001 -- the engine's refusal, listed
                refused.append((str(rel), " ".join(str(e).split())[:160].replace("|", "\\|")))
                continue
            acc = walks(g, g, args.walk_states, factories=factories)
            ok &= acc.equal == acc.positions
            rows.append([str(rel), f"{acc.positions:,}", f"{acc.equal:,}/{acc.positions:,}",
                         acc.first_difference or "-"])
        sections.append(f"## Random walks ({args.walk_tokenizer}), every grammar the engine accepts\n\n"
                        + markdown_table(["grammar", "states", "identical masks", "first difference"], rows)
                        + ("\n\nRefused by the engine (not walked):\n\n" + "\n".join(f"- {a}: {b}" for a, b in refused)
                           if refused else ""))
    body = ("The native core (`cad_outlines._native`, C++) against the pure-Python reference matcher it replaced "
            "(`engine/reference/matcher.py`), on the same compiled grammar (streamlined store): whole masks, EOS "
            f"included, compared at every position.\n\nRun time {time.perf_counter() - started:,.0f} s.\n\n"
            + "\n\n".join(sections))
    words = []
    for flag, value, default in (("--proof-tokens", args.proof_tokens, 100_000), ("--walk-states", args.walk_states, 2000),
                                 ("--walk-tokenizer", args.walk_tokenizer, "gpt2")):
        if value != default:
            words += [flag, str(value)]
    path = write_report(Path(args.out_dir), "native_equivalence", "Native core vs Python reference: identical masks",
                        body, " ".join(["python -m cad_outlines.cli study native-equivalence", *words]))
    print(f"wrote {path}")
    return 0 if ok else 1
