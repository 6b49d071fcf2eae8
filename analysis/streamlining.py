"""Streamlining: mask-store rows after each step, against SynCode's one-hop pruning, decode-time
parser calls and mask time before/after on real documents, and the proof that masks are unchanged.

1. For json, sql, copy_edit and python x each tokenizer: ``analyze_grammar`` (rows after each step,
   rows per lexer configuration, groups), then the real documents of the engine benchmark are
   teacher-forced through a matcher on the original store and one on the streamlined store in
   lockstep: both masks are timed at every position (alternating which goes first) and compared.
2. Python x Qwen2.5 on stdlib files (those lark parses) until ``--proof-tokens``: masks compared at
   every token.
3. Random constrained walks (``--walk-states`` states) for every grammar in the shared data folder
   the engine accepts (refusals are listed with their message) and copy_edit.lark: masks compared
   at every state.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .report import markdown_table, write_report

DESCRIPTION = "mask-store streamlining: rows per step vs SynCode's pruning, decode cost before/after, identical masks"

REPO = Path(__file__).resolve().parent.parent
MAIN = {"json": ("data:grammars/outlines/json.lark", None), "sql": ("data:grammars/syncode/sql.lark", None),
        "copy_edit": ("repo:grammars/copy_edit.lark", None), "python": ("data:grammars/lark/python.lark", "file_input")}


def add_arguments(parser) -> None:
    parser.add_argument("--grammars", default=",".join(MAIN), help="of " + ", ".join(MAIN))
    parser.add_argument("--tokenizers", default="qwen2.5,gpt2", help="rows table for these")
    parser.add_argument("--decode-tokenizers", default="qwen2.5",
                        help="teacher-force the documents for these (python x Qwen2.5 is the stdlib proof run)")
    parser.add_argument("--proof-tokens", type=int, default=100_000,
                        help="stdlib Python tokens (Qwen2.5) with both masks compared at every token")
    parser.add_argument("--walk-states", type=int, default=2000, help="random-walk states per grammar")
    parser.add_argument("--walk-tokenizer", default="gpt2", help="tokenizer for the all-grammars walks")
    parser.add_argument("--skip-walks", action="store_true")
    parser.add_argument("--max-doc-tokens", type=int, default=None, help="cap on teacher-forced tokens per pair")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def _data() -> Path:
    from .engine_bench import shared_data_dir

    data = shared_data_dir()
    if data is None:
        raise SystemExit("shared data folder not found (set CAD_OUTLINES_DATA)")
    return data


def _path(spec: str, data: Path) -> Path:
    kind, rel = spec.split(":", 1)
    return (data if kind == "data" else REPO) / rel


@dataclass
class Lockstep:
    positions: int = 0
    equal: int = 0
    us: dict = field(default_factory=lambda: {"original": [], "streamlined": []})
    calls: dict = field(default_factory=lambda: {"original": [], "streamlined": []})
    first_difference: str = ""

    def stats(self, which: str) -> list[str]:
        us, calls = np.asarray(self.us[which]), np.asarray(self.calls[which])
        if not len(us):
            return ["-"] * 6
        return [f"{calls.mean():.1f}", f"{calls.max()}", f"{us.mean():,.1f}", f"{np.percentile(us, 50):,.1f}",
                f"{np.percentile(us, 99):,.1f}", f"{us.max():,.1f}"]


def lockstep(raw, slim, tokens: list[int], acc: Lockstep, label: str = "", eos: bool = True, bar=None,
             factories=None) -> None:
    """Teacher-force `tokens` through matchers on both stores: time both masks at every
    position (the order alternates), compare them. `factories` (a pair of callables
    grammar -> matcher) replaces the default native matchers on both sides."""
    from cad_outlines.engine.matcher import Matcher

    fa, fb = factories or (Matcher, Matcher)
    ms = {"original": fa(raw), "streamlined": fb(slim)}
    for i in range(len(tokens) + (1 if eos else 0)):
        masks = {}
        order = ("original", "streamlined") if i % 2 == 0 else ("streamlined", "original")
        for which in order:
            m = ms[which]
            before = m.parser_checks
            t0 = time.perf_counter_ns()
            masks[which] = m.allowed_mask()
            acc.us[which].append((time.perf_counter_ns() - t0) / 1000)
            acc.calls[which].append(m.parser_checks - before)
        acc.positions += 1
        same = bool(np.array_equal(masks["original"], masks["streamlined"]))
        acc.equal += same
        if not same and not acc.first_difference:
            diff = np.flatnonzero(masks["original"] != masks["streamlined"])[:5]
            acc.first_difference = f"{label} position {i}: tokens {diff.tolist()}"
        if i < len(tokens):
            for m in ms.values():
                m.advance(tokens[i])
        if bar is not None:
            bar.update(1)


def walks(raw, slim, n_states: int, seed: int = 0, factories=None) -> Lockstep:
    """Random constrained walks (uniform over allowed tokens, EOS ends a walk) comparing
    both masks at every state (`factories` as in :func:`lockstep`)."""
    from cad_outlines.engine.matcher import Matcher

    fa, fb = factories or (Matcher, Matcher)
    rng = random.Random(seed)
    acc = Lockstep()
    eos = set(raw.eos_token_ids)
    while acc.positions < n_states:
        a, b = fa(raw), fb(slim)
        for _ in range(300):
            ma, mb = a.allowed_mask(), b.allowed_mask()
            acc.positions += 1
            same = bool(np.array_equal(ma, mb))
            acc.equal += same
            if not same and not acc.first_difference:
                acc.first_difference = f"walk state {acc.positions}: tokens {np.flatnonzero(ma != mb)[:5].tolist()}"
            allowed = np.flatnonzero(ma)
            if not len(allowed) or acc.positions >= n_states:
                break
            tok = int(allowed[rng.randrange(len(allowed))])
            if tok in eos:
                break
            a.advance(tok)
            b.advance(tok)
    return acc


def stdlib_proof(a, b, tok, gpath: Path, n_tokens: int, desc: str, factories=None) -> tuple[Lockstep, int]:
    """:func:`lockstep` over stdlib Python files that lark's python.lark parses, until
    `n_tokens` positions; returns the comparison and the number of files used."""
    import lark
    from lark.indenter import PythonIndenter
    from tqdm.auto import tqdm

    from .no_false_rejection import python_files

    checker = lark.Lark(gpath.read_text(), parser="lalr", lexer="basic", postlex=PythonIndenter(),
                        start="file_input", import_paths=[str(gpath.parent)])
    proof, files = Lockstep(), 0
    bar = tqdm(total=n_tokens, unit="tok", desc=desc, mininterval=1.0)
    for path in python_files(None):
        if proof.positions >= n_tokens:
            break
        try:
            text = path.read_text(encoding="utf-8")
            checker.parse(text)
        except Exception:  # noqa: BLE001 -- files lark rejects are skipped
            continue
        ids = tok.encode(text, add_special_tokens=False).ids[: n_tokens - proof.positions + 1]
        lockstep(a, b, ids, proof, path.name, bar=bar, factories=factories)
        files += 1
    bar.close()
    return proof, files


def walk_grammars(data: Path) -> list[tuple[Path, Path, str | None]]:
    """(path, name to show, start rule) of every grammar in the shared data, plus copy_edit.lark."""
    paths = sorted(p for p in (data / "grammars").rglob("*.lark") if p.name != "common.lark")
    paths.append(REPO / "grammars" / "copy_edit.lark")
    out = []
    for p in paths:
        rel = p.relative_to(data / "grammars") if data in p.parents else Path("repo") / p.name
        out.append((p, rel, "file_input" if p.name == "python.lark" and "lark" in p.parts else _start_of(p)))
    return out


def _start_of(path: Path) -> str | None:
    import re

    text = path.read_text(encoding="utf-8")
    if re.search(r"^\??start\s*:", text, re.M):
        return None
    m = re.search(r"^[?!]?([a-z_][a-z_0-9]*)\s*(\{[^}]*\})?\s*:", text, re.M)
    return m.group(1) if m else None


def run(args) -> int:
    from tokenizers import Tokenizer

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.compiled_grammar import CompiledGrammar
    from cad_outlines.engine.vocabulary import Vocabulary
    from cad_outlines.grammar_report import analyze_grammar

    from .engine_bench import GRAMMARS, load_documents

    data = _data()
    started = time.perf_counter()
    out = Path(args.out_dir)
    grammars = [g for g in args.grammars.split(",") if g]
    tokenizers = [t for t in args.tokenizers.split(",") if t]
    decode_tokenizers = [t for t in args.decode_tokenizers.split(",") if t]
    reports, side = {}, {}
    rows_table, decode_table = [], []
    for tname in tokenizers:
        tdir = data / "tokenizers" / tname
        vocab = Vocabulary.from_tokenizer(tdir)
        tok = Tokenizer.from_file(str(tdir / "tokenizer.json"))

        def encode(text: str) -> list[int]:
            return tok.encode(text, add_special_tokens=False).ids

        for gname in grammars:
            spec, start = MAIN[gname]
            gpath = _path(spec, data)
            print(f"== {gname} x {tname}", flush=True)
            rep = analyze_grammar(gpath, vocab, start=start, tokenizer_name=tname, progress=True)
            reports[(gname, tname)] = rep
            raw, slim = rep.original, rep.streamlined
            gc.collect()
            gc.freeze()  # the stores and tables live for the whole run: keep them out of GC passes
            rep.save(out / "streamlining", f"{gname}_{tname}")
            steps = {s["name"]: s["rows"] for s in rep.steps}
            first, last = rep.steps[0]["rows"], rep.steps[-1]["rows"]
            rows_table.append([gname, tname, f"{rep.lexer_configs:,}"] + [f"{steps[s['name']]:,}" for s in rep.steps]
                              + [f"{rep.syncode_rows:,}", f"{first / max(last, 1):.1f}x",
                                 f"{rep.syncode_rows / max(last, 1):.2f}x",
                                 f"{rep.stored_rows['original']:,} / {rep.stored_rows['streamlined']:,}",
                                 f"{rep.stored_rows['original'] / max(rep.stored_rows['streamlined'], 1):.1f}x",
                                 f"{first / max(rep.stored_rows['streamlined'], 1):.1f}x", f"{rep.analysis_seconds:.1f}"])
            if tname not in decode_tokenizers or (gname == "python" and tname == "qwen2.5" and args.proof_tokens):
                continue
            docs = load_documents(GRAMMARS[gname], gpath, data, [lambda t: len(encode(t))], 20000)
            acc = Lockstep()
            budget = args.max_doc_tokens
            for d in docs.docs:
                ids = encode(d.text)
                if budget is not None:
                    ids = ids[:budget]
                    budget -= len(ids)
                lockstep(raw, slim, ids, acc, d.name)
                if budget is not None and budget <= 0:
                    break
            side[(gname, tname)] = acc
            o, s = acc.stats("original"), acc.stats("streamlined")
            decode_table.append([gname, tname, f"{len(docs.docs)} benchmark docs", acc.positions, f"{o[0]} / {o[1]}",
                                 f"{s[0]} / {s[1]}", o[2], s[2], o[3], s[3], o[4], s[4],
                                 f"{acc.equal:,}/{acc.positions:,}"])

    # 2. the proof on stdlib Python
    proof = None
    if "python" in grammars and args.proof_tokens:
        tdir = data / "tokenizers" / "qwen2.5"
        vocab = Vocabulary.from_tokenizer(tdir)
        tok = Tokenizer.from_file(str(tdir / "tokenizer.json"))
        gpath = _path(MAIN["python"][0], data)
        raw = compile_grammar(gpath, vocab, start="file_input", streamline=False, progress=False).load_objects()
        slim = compile_grammar(gpath, vocab, start="file_input", progress=False).load_objects()
        gc.collect()
        gc.freeze()
        proof, files = stdlib_proof(raw, slim, tok, gpath, args.proof_tokens, "proof (stdlib)")
        proof_files = files
        o, s = proof.stats("original"), proof.stats("streamlined")
        decode_table.append(["python", "qwen2.5", f"{files} stdlib files (the proof run)", proof.positions,
                             f"{o[0]} / {o[1]}", f"{s[0]} / {s[1]}", o[2], s[2], o[3], s[3], o[4], s[4],
                             f"{proof.equal:,}/{proof.positions:,}"])

    # 3. walks over every grammar the engine accepts
    walk_rows, refusals = [], []
    if not args.skip_walks:
        tdir = data / "tokenizers" / args.walk_tokenizer
        vocab = Vocabulary.from_tokenizer(tdir)
        for p, rel, start in walk_grammars(data):
            print(f"== walks {rel}", flush=True)
            try:
                raw = compile_grammar(p, vocab, start=start, streamline=False, progress=False).load_objects()
                t0 = time.perf_counter()
                slim = compile_grammar(p, vocab, start=start, progress=False).load_objects()
                st_s = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 -- a refusal is reported, not fatal
                refusals.append(f"- `{rel}`: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
                continue
            slim = CompiledGrammar(raw.vocab, raw.lexer, slim.store, raw.tables, raw.indenter, raw.grammar_hash,
                                   streamlined=True)
            acc = walks(raw, slim, args.walk_states)
            walk_rows.append([f"`{rel}`", start or "start", f"{raw.store.n_rows:,}", f"{slim.store.n_rows:,}",
                              f"{raw.store.n_rows / max(slim.store.n_rows, 1):.1f}x", f"{st_s:.1f}",
                              f"{acc.equal:,}/{acc.positions:,}", acc.first_difference or "-"])

    # report
    step_names = [s["name"] for s in next(iter(reports.values())).steps] if reports else []
    body = ["Every row below comes from one run of this study. Rows are mask-store rows `(lexer configuration, "
            "labels completed, labels entered)` with their token set; the streamlined store is what the matcher "
            "uses by default (`compile_grammar(..., streamline=True)`). 'one-hop only' is SynCode's pruning (drop "
            "rows whose labels, after the label before the lexeme, hold a pair that never occurs) applied to the "
            "original store, the baseline to beat.", "",
            "## Mask-store rows after each step", "",
            markdown_table(["grammar", "tokenizer", "lexer configs"] + step_names
                           + ["one-hop only (SynCode)", "original / streamlined", "SynCode / streamlined",
                              "rows held original / streamlined", "held: original / streamlined",
                              "original per config / streamlined held", "analysis s"], rows_table), "",
            "Step columns count rows per lexer configuration: what a mask reads (one parser check per row of a "
            "live configuration). 'Rows held' counts what the store keeps: configurations with equal row lists "
            "share one (in memory, in the cache file and in the flat arrays the native core runs on), for both "
            "stores alike, so 'held: original / streamlined' is streamlining's own share of the saving; the last "
            "ratio compares the streamlined store as held with the original counted per configuration, as the "
            "step columns count it.", "",
            "Per pair, the full report (groups, successor statistics, time and memory per step, rows per lexer "
            "configuration) is in `docs/results/streamlining/<grammar>_<tokenizer>.md` with its JSON and plot.", ""]
    if reports:
        from cad_outlines.grammar_report import context_note, context_table_lines

        body += ["## Rows by context, and the seed blog's measure", "", context_note(), "",
                 *context_table_lines([r.by_context for r in reports.values()],
                                      [f"{g} x {t}" for g, t in reports]), ""]
    py = reports.get(("python", "qwen2.5"))
    if py is not None:
        body += ["## python.lark: interchangeable terminals", "",
                 f"{len(py.groups)} groups, {sum(map(len, py.groups))} terminals (the blog reports 7 groups / 35 "
                 "terminals):", ""] + [f"{i + 1}. {', '.join(g)}" for i, g in enumerate(py.group_display)] + [""]
        s = py.successors
        body += [f"Successors: {s['pairs_possible']:,} of {s['pairs']:,} label pairs occur; pairs proved always "
                 f"legal: {s['always_dft']:,} by unlimited credit exploration of the DFT pushdown automaton (grammar "
                 f"left-factored first), {s['always_lr']:,} on the LALR automaton. Lexer configurations by the number "
                 f"of labels that can precede them: {s['contexts']}.", "",
                 f"With NEWLINE indentation ignored (the blog's store does not model lark's Indenter), the "
                 f"streamlined python x qwen2.5 store would have {py.rows_without_indentation:,} rows "
                 f"({py.steps[0]['rows'] / max(py.rows_without_indentation, 1):.1f}x fewer than the original).", ""]
    body += ["## Decoding real documents, both stores in one run", "",
             "The engine benchmark's documents teacher-forced through a matcher on each store in lockstep "
             "(`Matcher.allowed_mask`, the order alternating per position); parser calls are "
             "`Matcher.parser_checks` per mask.", "",
             markdown_table(["grammar", "tokenizer", "docs", "positions", "parser calls mean / max original",
                             "streamlined", "mask us mean original", "streamlined", "p50 original", "streamlined",
                             "p99 original", "streamlined", "identical masks"], decode_table), ""]
    if proof is not None:
        o, s = proof.stats("original"), proof.stats("streamlined")
        body += ["## Proof: stdlib Python, Qwen2.5", "",
                 f"{proof_files} stdlib files that lark parses, {proof.positions:,} positions (every token, and EOS "
                 f"after each whole file): masks identical at **{proof.equal:,} of {proof.positions:,}**"
                 + (f"; first difference: {proof.first_difference}" if proof.first_difference else "") + ". "
                 f"Parser calls per mask {o[0]} -> {s[0]} (max {o[1]} -> {s[1]}); mask us mean {o[2]} -> {s[2]}, "
                 f"p50 {o[3]} -> {s[3]}, p99 {o[4]} -> {s[4]}.", ""]
    if walk_rows or refusals:
        body += [f"## Proof: random constrained walks, every grammar the engine accepts ({args.walk_tokenizer})", "",
                 markdown_table(["grammar", "start", "rows original", "streamlined", "fewer", "streamlining s",
                                 "identical masks", "first difference"], walk_rows), ""]
        if refusals:
            body += ["Grammars the engine refuses (the message names the construct):", ""] + refusals + [""]
    body.append(f"The study took {time.perf_counter() - started:.0f} s.")
    cmd = ("cad-outlines study streamlining --grammars " + args.grammars + " --tokenizers " + args.tokenizers
           + f" --proof-tokens {args.proof_tokens} --walk-states {args.walk_states}")
    path = write_report(args.out_dir, "streamlining", "Mask-store streamlining", "\n".join(body), cmd)
    if py is not None:
        py.plot(out / "streamlining.png")
    print(f"wrote {path}")
    return 0
