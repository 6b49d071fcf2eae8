"""Lazy grammars: time to first mask, the cost of a configuration's first use, and proof
that lazy masks equal eager ones.

``compile_grammar(..., lazy=True)`` runs only the grammar's own phases (lark, terminal
automata, parse tables, the lexer's byte automaton); the native core builds a lexer
configuration's rows the first time a mask needs them.

1. **Time to first mask** (Qwen2.5): a grammar never seen (empty cache) and one seen
   before (its lazy file cached, no rows kept), beside llguidance and xgrammar compiling
   the same grammar text and filling their first mask. The vocabulary's own one-time
   setup (its token arrays and byte trie, shared by every grammar of the tokenizer) is
   measured separately, as llguidance's and xgrammar's tokenizer objects are.
2. **First use during decoding**: teacher-forced documents through a fresh lazy grammar;
   every configuration a position needs that is not built yet is built and timed on its
   own; lazy and eager masks are compared at every position and both timed.
3. **Walks of every grammar the engine accepts** (GPT-2): lazy vs eager masks.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from .report import markdown_table, write_report

DESCRIPTION = "lazy grammars: time to first mask vs llguidance/xgrammar, first-use cost, lazy == eager masks"

REPO = Path(__file__).resolve().parent.parent
PHASES = ("lark load", "terminal DFAs", "parse tables", "lexer configurations", "flat arrays", "matcher + first mask")


def add_arguments(parser) -> None:
    parser.add_argument("--grammars", default="json,sql,copy_edit,python")
    parser.add_argument("--repeats", type=int, default=5, help="time-to-first-mask runs per engine (median)")
    parser.add_argument("--proof-tokens", type=int, default=100_000, help="stdlib Python tokens (Qwen2.5)")
    parser.add_argument("--walk-states", type=int, default=2000, help="random-walk states per grammar")
    parser.add_argument("--skip-walks", action="store_true")
    parser.add_argument("--no-compare", action="store_true", help="no llguidance / xgrammar")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def _first_mask_ours(path: Path, vocab, start, cache: Path, phases: dict | None = None) -> tuple[float, float, int]:
    """(seconds to the first mask, of which compile/load, configurations built); the
    compile's phases are added to `phases` (name -> list of seconds)."""
    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.compile_profile import CompileProfile
    from cad_outlines.engine.matcher import Matcher, allocate_token_bitmask

    prof = CompileProfile()
    t0 = time.perf_counter()
    g = compile_grammar(path, vocab, start=start, cache=cache, progress=False, lazy=True, profile=prof)
    t1 = time.perf_counter()
    m = Matcher(g)
    buf = allocate_token_bitmask(1, vocab.size)
    m.fill_next_token_bitmask(buf[0])
    t2 = time.perf_counter()
    if phases is not None:
        for p in prof.phases:
            phases.setdefault(p.name, []).append(p.seconds)
        phases.setdefault("matcher + first mask", []).append(t2 - t1)
    return t2 - t0, t1 - t0, g.native.configs_built


def forget_patterns() -> None:
    """Drop the per-pattern caches of the terminal compiler (regex -> DFA), so a "new
    grammar" run compiles every terminal again; the per-process Unicode tables stay built
    (a server builds them once, at its first grammar)."""
    from cad_outlines.engine.frontend import automata, terminals

    terminals._terminal_dfas.cache_clear()
    automata._compile.cache_clear()


def _first_mask_llg(tok, text: str) -> float:
    import llguidance
    import llguidance.numpy

    t0 = time.perf_counter()
    grammar = llguidance.grammar_from("lark", text)
    m = llguidance.LLMatcher(tok, grammar)
    buf = llguidance.numpy.allocate_token_bitmask(1, tok.vocab_size)
    llguidance.numpy.fill_next_token_bitmask(m, buf, 0)
    t = time.perf_counter() - t0
    if m.is_error():
        raise RuntimeError(m.get_error())
    return t


def _first_mask_xgr(info, text: str) -> float:
    import xgrammar as xg

    t0 = time.perf_counter()
    compiled = xg.GrammarCompiler(info, cache_enabled=False).compile_grammar(xg.Grammar.from_lark(text))
    m = xg.GrammarMatcher(compiled)
    buf = xg.allocate_token_bitmask(1, info.vocab_size)
    m.fill_next_token_bitmask(buf)
    return time.perf_counter() - t0


def _median_ms(xs: list[float]) -> str:
    return f"{1000 * statistics.median(xs):,.1f}"


def _peer_text(gpath: Path) -> tuple[str, str]:
    """The grammar text peers get (imports inlined, as in the engine benchmark) and a note."""
    from .engine_bench import _lark_stdlib_dir, inline_imports

    text, _names, changed = inline_imports(gpath.read_text(encoding="utf-8"), [gpath.parent, _lark_stdlib_dir()])
    return text, "imports inlined" if changed else ""


def first_use_run(eager, lazy, docs: list[list[int]], bar=None) -> dict:
    """Teacher-force token lists through both grammars; build each missing configuration
    on its own (timed), then time and compare both masks at every position."""
    from cad_outlines.engine.matcher import Matcher, allocate_token_bitmask, unpack_bitmask

    native = lazy.native
    V = lazy.vocab_size
    out = dict(positions=0, equal=0, build_ms=[], lazy_us=[], eager_us=[], first_diff="")
    be, bl = allocate_token_bitmask(1, V), allocate_token_bitmask(1, V)
    for doc_i, ids in enumerate(docs):
        me, ml = Matcher(eager), Matcher(lazy)
        for i in range(len(ids) + 1):
            for cfg, _pending, _acc in ml._m.live():
                if not native.is_built(cfg):
                    t0 = time.perf_counter_ns()
                    native.build_config(cfg)
                    out["build_ms"].append((time.perf_counter_ns() - t0) / 1e6)
            t0 = time.perf_counter_ns()
            ml.fill_next_token_bitmask(bl[0])
            t1 = time.perf_counter_ns()
            me.fill_next_token_bitmask(be[0])
            t2 = time.perf_counter_ns()
            out["lazy_us"].append((t1 - t0) / 1000)
            out["eager_us"].append((t2 - t1) / 1000)
            out["positions"] += 1
            same = bool(np.array_equal(be, bl))
            out["equal"] += same
            if not same and not out["first_diff"]:
                d = np.flatnonzero(unpack_bitmask(be[0], V) != unpack_bitmask(bl[0], V))[:5]
                out["first_diff"] = f"document {doc_i} position {i}: tokens {d.tolist()}"
            if i < len(ids):
                me.advance(ids[i])
                ml.advance(ids[i])
            if bar is not None:
                bar.update(1)
    out["configs_built"] = native.configs_built
    out["configs"] = native.n_configs
    return out


def _pct(xs, q) -> str:
    return f"{np.percentile(xs, q):,.2f}" if len(xs) else "-"


def run(args) -> int:
    import platform

    from tokenizers import Tokenizer
    from tqdm.auto import tqdm
    from transformers import PreTrainedTokenizerFast

    from cad_outlines.engine.compile import compile_grammar, wait_for_cache_writes
    from cad_outlines.engine.vocabulary import Vocabulary

    from .engine_bench import GRAMMARS, _resolve, _version, load_documents
    from .streamlining import _data

    data = _data()
    started = time.perf_counter()
    grammars = [g for g in args.grammars.split(",") if g]
    tdir = data / "tokenizers" / "qwen2.5"
    setup = []
    t = time.perf_counter()
    vocab = Vocabulary.from_tokenizer(tdir)
    setup.append(["our Vocabulary (token bytes from tokenizer.json)", f"{time.perf_counter() - t:.2f}"])
    tok = Tokenizer.from_file(str(tdir / "tokenizer.json"))
    llg_tok = xgr_info = None
    if not args.no_compare:
        hf = PreTrainedTokenizerFast.from_pretrained(str(tdir))
        try:
            import llguidance.hf

            t = time.perf_counter()
            llg_tok = llguidance.hf.from_tokenizer(hf)
            setup.append(["llguidance tokenizer (llguidance.hf.from_tokenizer)", f"{time.perf_counter() - t:.2f}"])
        except Exception as e:  # noqa: BLE001
            setup.append([f"llguidance tokenizer failed: {e}", "-"])
        try:
            import xgrammar as xg

            t = time.perf_counter()
            xgr_info = xg.TokenizerInfo.from_huggingface(hf, vocab_size=vocab.size)
            setup.append(["xgrammar TokenizerInfo", f"{time.perf_counter() - t:.2f}"])
        except Exception as e:  # noqa: BLE001
            setup.append([f"xgrammar tokenizer failed: {e}", "-"])
    # the vocabulary's one-time native setup, paid by the first lazy grammar of a tokenizer
    from cad_outlines.engine.store.flat_grammar import _VOCAB_ARRAYS

    _VOCAB_ARRAYS.clear()
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        g = compile_grammar(REPO / "grammars" / "copy_edit.lark", vocab, cache=Path(d), progress=False, lazy=True)
        wait_for_cache_writes()
        t1 = time.perf_counter()
        g.vocab_trie()
        t2 = time.perf_counter()
    setup.append(["our vocabulary arrays (first lazy compile of the tokenizer, copy_edit.lark included)",
                  f"{t1 - t:.2f}"])
    setup.append([f"our vocabulary byte trie ({g.vocab_trie().n_nodes:,} nodes, {g.vocab_trie().n_tokens:,} tokens)",
                  f"{t2 - t1:.2f}"])

    # 1. time to first mask
    ttfm_rows, refusals, notes, phase_rows = [], [], [], []
    for gname in grammars:
        spec = GRAMMARS[gname]
        gpath = _resolve(spec.path, data)
        print(f"== time to first mask: {gname}", flush=True)
        new, seen, comp, built, phases = [], [], [], 0, {}
        text, note = _peer_text(gpath)
        peers = {name: (fn, handle, []) for name, fn, handle in
                 (("llguidance", _first_mask_llg, llg_tok), ("xgrammar", _first_mask_xgr, xgr_info))
                 if handle is not None}
        refused: dict[str, str] = {}
        for _ in range(args.repeats):  # ours and the peers in turn, so a slow spell of the machine hits all
            with tempfile.TemporaryDirectory() as d:
                forget_patterns()
                gc.collect()
                total, c, built = _first_mask_ours(gpath, vocab, spec.start, Path(d), phases)
                new.append(total)
                comp.append(c)
                wait_for_cache_writes()  # the file written beside the first mask
                gc.collect()
                seen.append(_first_mask_ours(gpath, vocab, spec.start, Path(d))[0])
            for name, (fn, handle, xs) in peers.items():
                if name in refused:
                    continue
                try:
                    xs.append(fn(handle, text))
                except Exception as e:  # noqa: BLE001 -- a refusal is reported
                    refused[name] = " ".join(str(e).split())[:200]
        row = [gname, _median_ms(new), _median_ms(comp), _median_ms(seen), f"{built}"]
        for name in ("llguidance", "xgrammar"):
            if name not in peers:
                row += ["-", "-"]
            elif name in refused:
                refusals.append(f"- {name} on `{gname}`: {refused[name]}")
                row += ["refused", "-"]
            else:
                xs = peers[name][2]
                row += [_median_ms(xs), f"{statistics.median(new) / statistics.median(xs):.1f}x / "
                        f"{statistics.median(seen) / statistics.median(xs):.2f}x"]
        if note:
            notes.append(f"- `{gname}`: peers get the grammar with its {note} (as in the engine benchmark).")
        ttfm_rows.append(row)
        phase_rows.append([gname] + [_median_ms(phases[k]) if k in phases else "-" for k in PHASES])

    # 2. first use of configurations while decoding, lazy vs eager masks
    decode_rows = []
    counter = [lambda text: len(tok.encode(text, add_special_tokens=False).ids)]
    for gname in grammars:
        spec = GRAMMARS[gname]
        gpath = _resolve(spec.path, data)
        print(f"== first use while decoding: {gname}", flush=True)
        eager = compile_grammar(gpath, vocab, start=spec.start, progress=True)
        with tempfile.TemporaryDirectory() as d:
            lazy = compile_grammar(gpath, vocab, start=spec.start, cache=Path(d), progress=False, lazy=True)
            wait_for_cache_writes()
        if gname == "python":
            from .no_false_rejection import python_files

            import lark
            from lark.indenter import PythonIndenter

            checker = lark.Lark(gpath.read_text(), parser="lalr", lexer="basic", postlex=PythonIndenter(),
                                start="file_input", import_paths=[str(gpath.parent)])
            docs, n, files = [], 0, 0
            for path in python_files(None):
                if n >= args.proof_tokens:
                    break
                try:
                    text = path.read_text(encoding="utf-8")
                    checker.parse(text)
                except Exception:  # noqa: BLE001 -- files lark rejects are skipped
                    continue
                ids = tok.encode(text, add_special_tokens=False).ids[: args.proof_tokens - n]
                docs.append(ids)
                n += len(ids)
                files += 1
            what = f"{files} stdlib files"
        else:
            ds = load_documents(spec, gpath, data, counter, 0)
            docs = [tok.encode(d.text, add_special_tokens=False).ids for d in ds.docs]
            what = f"{len(docs)} documents (engine benchmark's)"
        total = sum(len(d) + 1 for d in docs)
        with tqdm(total=total, unit="tok", desc=f"{gname}: lazy vs eager", mininterval=1.0) as bar:
            r = first_use_run(eager, lazy, docs, bar)
        b = r["build_ms"]
        decode_rows.append([gname, what, f"{r['positions']:,}", f"{r['configs_built']:,} / {r['configs']:,}",
                            _pct(b, 50), _pct(b, 90), f"{max(b):,.1f}" if b else "-", f"{sum(b):,.0f}",
                            f"{np.mean(r['lazy_us']):,.1f} / {np.mean(r['eager_us']):,.1f}",
                            f"{np.percentile(r['lazy_us'], 99):,.1f} / {np.percentile(r['eager_us'], 99):,.1f}",
                            f"{r['equal']:,}/{r['positions']:,}", r["first_diff"] or "-"])
        del eager, lazy
        gc.collect()

    # 3. walks of every grammar the engine accepts
    walk_rows, walk_refusals = [], []
    if not args.skip_walks:
        from .streamlining import walk_grammars, walks

        wv = Vocabulary.from_tokenizer(data / "tokenizers" / "gpt2")
        for p, rel, start in walk_grammars(data):
            print(f"== walks {rel}", flush=True)
            try:
                eager = compile_grammar(p, wv, start=start, progress=False)
                with tempfile.TemporaryDirectory() as d:
                    lazy = compile_grammar(p, wv, start=start, cache=Path(d), progress=False, lazy=True)
                    wait_for_cache_writes()
            except Exception as e:  # noqa: BLE001 -- a refusal is reported, not fatal
                walk_refusals.append(f"- `{rel}`: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
                continue
            acc = walks(eager, lazy, args.walk_states)
            walk_rows.append([f"`{rel}`", start or "start", f"{lazy.native.configs_built:,} / {lazy.native.n_configs:,}",
                              f"{acc.equal:,}/{acc.positions:,}", acc.first_difference or "-"])

    ok = all(r[-2].split("/")[0] == r[-2].split("/")[1] for r in decode_rows)
    ok &= all(r[-2].split("/")[0] == r[-2].split("/")[1] for r in walk_rows)
    elapsed = time.perf_counter() - started
    import os

    body = [
        "`compile_grammar(..., lazy=True)` runs the grammar's own phases only (the Lark grammar read into "
        "terminals and BNF rules, terminal automata, LALR tables built natively, the lexer's byte automaton built natively) and "
        "writes one small flat file (on a thread, beside the first mask); the native core builds a lexer "
        "configuration's mask-store rows the first time a mask needs them (`cad_outlines/_native/src/lazy_store.cpp`: "
        "a walk of the vocabulary's byte trie from each hypothesis a first byte reaches, memoised and shared by every "
        "configuration that reaches the same hypothesis). Lazy rows are not streamlined; masks are identical "
        "(sections 2 and 3).", "",
        "## Once per tokenizer", "",
        "Shared by every grammar of the tokenizer (peers' tokenizer objects beside ours).", "",
        markdown_table(["setup", "seconds"], setup), "",
        "## 1. Time to first mask (Qwen2.5)", "",
        f"Median of {args.repeats} runs, ours and the peers' taken in turn. *New grammar*: "
        "`compile_grammar(path, lazy=True)` with an empty cache and "
        "the terminal compiler's per-pattern caches cleared (what a process keeps across grammars stays: the "
        "Unicode tables and the parse trees of `%import`ed files, e.g. json.lark's common.lark), a "
        "matcher, its first bitmask (the configurations built for it are counted). *Seen before*: the same with its "
        "lazy file in the cache (a memory-map; rows are not kept across processes, so the first configuration is "
        "built again). Peers: llguidance `grammar_from('lark') + LLMatcher + fill`, xgrammar `compile_grammar` "
        "(its cache off) `+ GrammarMatcher + fill`. Ratios are ours / theirs (new / seen before).", "",
        markdown_table(["grammar", "ours new grammar ms", "of which compile ms", "ours seen before ms",
                        "configs built", "llguidance ms", "ours / llguidance", "xgrammar ms", "ours / xgrammar"],
                       ttfm_rows), "",
        *notes, "", "Where a new grammar's time goes (median ms per phase of the same runs; \"lark load\" reads the "
        "grammar into lark's terminals and BNF rules by hand (`engine/frontend/lark_syntax.py`, `engine/frontend/lark_rules.py`: "
        "equal to lark's reader and EBNF compiler, which it replaces), \"terminal DFAs\" our regex compiler "
        "(sre parse and determinisation in Python; UTF-8 expansion, minimisation, the keyword product and the "
        "lexer tables native: `_native/src/dfa.cpp`; plain-literal terminals built directly), \"parse tables\" the native LALR builder (`_native/src/lalr.cpp`), \"lexer configurations\" the "
        "native byte automaton (`_native/src/byte_automaton.cpp`); the file is written on a thread):", "",
        markdown_table(["grammar", *PHASES], phase_rows), "",
        *(["Refusals:", *refusals, ""] if refusals else []),
        "## 2. First use of configurations while decoding (Qwen2.5)", "",
        "A fresh lazy grammar teacher-forced through the documents; each configuration a position needs that is not "
        "built yet is built on its own and timed (`first use` columns, milliseconds); then both masks, lazy and eager "
        "(streamlined, from the cache), are filled, timed (microseconds) and compared.", "",
        markdown_table(["grammar", "documents", "positions", "configs built / all", "first use p50 ms",
                        "p90 ms", "max ms", "all builds ms", "mask mean us lazy / eager", "mask p99 us lazy / eager",
                        "identical masks", "first difference"], decode_rows), "",
    ]
    if walk_rows or walk_refusals:
        body += ["## 3. Random constrained walks, every grammar the engine accepts (GPT-2)", "",
                 f"{args.walk_states:,} states per grammar, lazy vs eager (streamlined) masks at every state.", "",
                 markdown_table(["grammar", "start", "configs built / all", "identical masks", "first difference"],
                                walk_rows), ""]
        if walk_refusals:
            body += ["Grammars the engine refuses (as in the streamlining study):", "", *walk_refusals, ""]
    command = (f"cad-outlines study lazy-compile --grammars {args.grammars} --repeats {args.repeats} "
               f"--proof-tokens {args.proof_tokens} --walk-states {args.walk_states}"
               + (" --skip-walks" if args.skip_walks else "") + (" --no-compare" if args.no_compare else ""))
    body += [f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
             f"lark {_version('lark')}, llguidance {_version('llguidance')}, xgrammar {_version('xgrammar')}, "
             f"numpy {np.__version__}. Load average at the end {os.getloadavg()[0]:.2f}. "
             f"Took {elapsed / 60:.1f} min. All masks identical: {'yes' if ok else 'NO'}."]
    path = write_report(args.out_dir, "lazy_compile", "Lazy grammars: time to first mask and first use",
                        "\n".join(body), command)
    print(f"wrote {path}")
    return 0 if ok else 1
