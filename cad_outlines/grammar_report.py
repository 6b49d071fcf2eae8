"""The grammar analysis report: what streamlining finds in a grammar and what it buys.

``analyze_grammar(grammar, vocab)`` returns a :class:`GrammarReport` (terminals, rules,
interchangeable groups, successor statistics, mask-store rows after each streamlining
step and per lexer configuration, time and memory of each step, and, given a document,
parser calls and mask time per token before and after); ``cad-outlines analyze`` writes
it as Markdown, JSON and a PNG.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .engine.compile import compile_grammar, load_lark, show_progress
from .engine.compile_profile import CompileProfile
from .engine.compiled_grammar import CompiledGrammar
from .engine.store.grammar_analysis import GrammarAnalysis, LRGame
from .engine.store.lexer import INDENT_BASE
from .engine.matcher import Matcher
from .engine.store.streamline import _label_view, one_hop_only, streamline
from .engine.vocabulary import Vocabulary
from .grammars import grammar_source

__all__ = ["GrammarReport", "DecodeStats", "analyze_grammar"]


def _rss_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


@dataclass
class DecodeStats:
    """Per-token mask computation while teacher-forcing a document."""

    store: str  # "original" or "streamlined"
    positions: int
    parser_calls_mean: float
    parser_calls_max: int
    mask_us_mean: float
    mask_us_p50: float
    mask_us_p99: float
    mask_us_max: float


@dataclass
class GrammarReport:
    grammar: str
    tokenizer: str
    vocab_size: int
    terminals: int
    lexer_labels: int
    rules: int
    nonterminals: int
    factored_rules: int
    lexer_configs: int
    groups: list[list[str]]
    group_display: list[list[str]]  # the groups with string terminals shown as their text
    successors: dict
    steps: list[dict]  # name, rows, seconds, rss_mib
    syncode_rows: int
    rows_without_indentation: int | None  # None: the grammar has no indenter
    rows_per_config: dict[str, list[int]]
    analysis_seconds: float
    decode: list[DecodeStats] = field(default_factory=list)
    identical_masks: tuple[int, int] | None = None  # (equal, compared)
    document: str = ""
    compile_phases: list[dict] = field(default_factory=list)  # CompileProfile phases of the (unstreamlined) compile
    by_context: dict = field(default_factory=dict)  # see rows_by_context
    stored_rows: dict = field(default_factory=dict)  # original / streamlined: rows held, equal row lists once

    # -- output -------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def to_markdown(self) -> str:
        first, last = self.steps[0]["rows"], self.steps[-1]["rows"]
        lines = [f"# Grammar analysis: {self.grammar} x {self.tokenizer}", ""]
        lines += [f"- terminals: {self.terminals} ({self.lexer_labels} lexer labels); rules: {self.rules} "
                  f"({self.factored_rules} after left factoring); nonterminals: {self.nonterminals}",
                  f"- vocabulary: {self.vocab_size:,} tokens; lexer configurations: {self.lexer_configs:,}",
                  f"- mask-store rows: {first:,} -> {last:,} ({first / max(last, 1):.1f}x fewer); "
                  f"one-hop successor pruning alone (SynCode's method): {self.syncode_rows:,} "
                  f"({self.syncode_rows / max(last, 1):.2f}x more than streamlined)",
                  *([f"- rows held, configurations with equal rows sharing them: {self.stored_rows['original']:,} -> "
                     f"{self.stored_rows['streamlined']:,} "
                     f"({self.stored_rows['original'] / max(self.stored_rows['streamlined'], 1):.1f}x fewer)"]
                    if self.stored_rows else []),
                  f"- analysis time: {self.analysis_seconds:.1f} s", ""]
        lines += ["## Interchangeable terminals", ""]
        if self.groups:
            lines += [f"{len(self.groups)} groups, {sum(map(len, self.groups))} terminals "
                      "(the first of each group is its representative):", ""]
            lines += [f"{i + 1}. {', '.join(g)}" for i, g in enumerate(self.group_display)]
        else:
            lines.append("none")
        s = self.successors
        lines += ["", "## Successors", "",
                  f"- terminal pairs (a, b) with b directly after a in some sentence: {s['pairs_possible']:,} "
                  f"of {s['pairs']:,} ({s['mean_successors']:.1f} successors per terminal on average)",
                  f"- pairs proved always legal: {s['always_dft']:,} by unlimited credit exploration of the DFT "
                  f"pushdown automaton, {s['always_lr']:,} on the LALR automaton, {s['always_any']:,} by either",
                  f"- lexer configurations by the number of labels that can precede them: {s['contexts']}", ""]
        lines += ["## Mask-store rows after each step", "",
                  "| step | rows | x fewer than original | seconds | RSS MiB after |", "|---|---|---|---|---|"]
        for st in self.steps:
            lines.append(f"| {st['name']} | {st['rows']:,} | {first / max(st['rows'], 1):.2f} | "
                         f"{st['seconds']:.2f} | {st['rss_mib']:.0f} |")
        lines.append(f"| (baseline) one-hop successors only, SynCode's pruning | {self.syncode_rows:,} | "
                     f"{first / max(self.syncode_rows, 1):.2f} | | |")
        if self.rows_without_indentation is not None:
            lines.append(f"| (diagnostic) streamlined rows with NEWLINE indentation ignored | "
                         f"{self.rows_without_indentation:,} | {first / max(self.rows_without_indentation, 1):.2f} "
                         "| | |")
        lines.append("")
        if self.by_context:
            lines += ["## Rows by context", "", context_note(), "",
                      *context_table_lines([self.by_context]), ""]
        if self.compile_phases:
            lines += ["## Compile phases", "",
                      "The compile this report ran (the unstreamlined store; a cached store shows as a load; the "
                      "streamlining steps are in the table above). Peak RSS: the process's high-water mark at the "
                      "phase's end.", "", "| phase | wall s | CPU s | peak RSS MiB | note |", "|---|---|---|---|---|"]
            for ph in self.compile_phases:
                lines.append(f"| {ph['name']} | {ph['seconds']:.2f} | {ph['cpu_seconds']:.2f} | "
                             f"{ph['peak_rss_mib']:.0f} | {ph['note']} |")
            lines.append("")
        if self.decode:
            lines += [f"## Decoding {self.document}", "",
                      "| store | positions | parser calls per token mean / max | mask us mean | p50 | p99 | max |",
                      "|---|---|---|---|---|---|---|"]
            for d in self.decode:
                lines.append(f"| {d.store} | {d.positions:,} | {d.parser_calls_mean:.1f} / {d.parser_calls_max} | "
                             f"{d.mask_us_mean:,.1f} | {d.mask_us_p50:,.1f} | {d.mask_us_p99:,.1f} | "
                             f"{d.mask_us_max:,.1f} |")
            if self.identical_masks:
                eq, n = self.identical_masks
                lines += ["", f"Identical masks at {eq:,} of {n:,} positions."]
        return "\n".join(lines) + "\n"

    def plot(self, path: str | Path) -> None:
        import matplotlib  # a dependency of the package: `cad-outlines analyze` draws this

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        names = [s["name"] for s in self.steps] + ["one-hop only\n(SynCode)"]
        rows = [s["rows"] for s in self.steps] + [self.syncode_rows]
        ax1.bar(range(len(rows)), rows, color=["C0"] * len(self.steps) + ["C3"])
        ax1.set_xticks(range(len(rows)), [n.replace(" ", "\n", 1) for n in names], fontsize=7)
        if max(rows, default=0) > 0:  # a grammar without terminals has no rows: nothing to put on a log scale
            ax1.set_yscale("log")
        ax1.set_ylabel("mask-store rows")
        ax1.set_title(f"{self.grammar} x {self.tokenizer}")
        for label, counts in self.rows_per_config.items():
            c = np.sort(np.asarray(counts))
            ax2.plot(c, np.arange(1, len(c) + 1) / len(c), label=label)
        ax2.set_xscale("symlog")
        ax2.set_xlabel("rows per lexer configuration")
        ax2.set_ylabel("fraction of configurations")
        ax2.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)

    def save(self, out_dir: str | Path, stem: str) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        md, js, png = out / f"{stem}.md", out / f"{stem}.json", out / f"{stem}.png"
        md.write_text(self.to_markdown(), encoding="utf-8")
        js.write_text(self.to_json(), encoding="utf-8")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(f"note: matplotlib is not installed, so {png.name} was not drawn (pip install matplotlib)",
                  file=sys.stderr)
            return [md, js]
        self.plot(png)
        return [md, js, png]


class _Steps:
    """A progress bar over the analysis steps (each call starts the next step), with
    nested bars for the long loops; silent without `progress`."""

    def __init__(self, progress: bool, total: int):
        self.progress = progress
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(desc="analysis", total=total, unit="step", leave=False)
        self.started = False

    def __call__(self, name: str) -> None:
        if self.bar is not None:
            if self.started:
                self.bar.update(1)
            self.started = True
            self.bar.set_postfix_str(name)

    def iter(self, items, desc: str, unit: str):
        if not self.progress:
            return items
        from tqdm.auto import tqdm

        return tqdm(items, desc=desc, unit=unit, leave=False, mininterval=0.5)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()


def context_note() -> str:
    return ("Configurations by the number of labels that can precede their lexeme (1: the label before it is "
            "known exactly); 'checks >= 2 labels': streamlined rows whose parser check reads two labels or more; "
            "'per (configuration, label)': rows re-keyed as the seed blog's store is, one boundary state per "
            "preceding terminal, a row counted for every preceding label after which its labels are not one-hop "
            "impossible (the streamlined store is not re-streamlined per label).")


def context_table_lines(items: list[dict], keys: list[str] | None = None) -> list[str]:
    """A markdown table of :func:`rows_by_context` results (one line per item; `keys`
    prefix each line, e.g. grammar and tokenizer)."""
    head = ["grammar"] if keys is not None else []
    cols = []
    for c in CONTEXT_CLASSES:
        cols += [f"configs ({c})", f"rows orig. / streaml. ({c})", f"checks >= 2 labels ({c})", f"one token ({c})"]
    cols += ["per (configuration, label) orig. / streaml.", "orig. / streaml. (x)"]
    lines = ["| " + " | ".join(head + cols) + " |", "|" + "---|" * (len(head) + len(cols))]
    for i, item in enumerate(items):
        cells = [keys[i]] if keys is not None else []
        for c in CONTEXT_CLASSES:
            r = item["classes"][c]
            cells += [f"{r['configs']:,}", f"{r['original']:,} / {r['streamlined']:,}", f"{r['checks_2plus']:,}",
                      f"{r['one_token']:,}"]
        o, s = item["per_label"]["original"], item["per_label"]["streamlined"]
        cells += [f"{o:,} / {s:,}", f"{o / max(s, 1):.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _display(lk, name: str) -> str:
    """A terminal as a reader knows it: `"+="` for a string terminal, its name otherwise."""
    for t in lk.terminals:
        if t.name == name:
            return f'"{t.pattern.value}"' if t.pattern.type == "str" else name
    return name


def decode_stats(grammar: CompiledGrammar, tokens: list[int], label: str, compare: CompiledGrammar | None = None,
                 progress: bool = False) -> tuple[DecodeStats, tuple[int, int] | None]:
    """Teacher-force `tokens`, timing the bool mask at every position (and the final EOS
    position); with `compare`, also check its masks are identical."""
    m = Matcher(grammar)
    other = Matcher(compare) if compare is not None else None
    times, calls = [], []
    equal = 0
    positions = range(len(tokens) + 1)
    if progress:
        from tqdm.auto import tqdm

        positions = tqdm(positions, desc=f"masks, {label} store", unit="token", leave=False, mininterval=0.5)
    for i in positions:
        before = m.parser_checks
        t0 = time.perf_counter_ns()
        mask = m.allowed_mask()
        times.append(time.perf_counter_ns() - t0)
        calls.append(m.parser_checks - before)
        if other is not None:
            equal += bool(np.array_equal(mask, other.allowed_mask()))
        if i < len(tokens):
            m.advance(tokens[i])
            if other is not None:
                other.advance(tokens[i])
    us = np.asarray(times) / 1000
    stats = DecodeStats(label, len(us), float(np.mean(calls)), int(max(calls)), float(us.mean()),
                        float(np.percentile(us, 50)), float(np.percentile(us, 99)), float(us.max()))
    return stats, ((equal, len(us)) if other is not None else None)


CONTEXT_CLASSES = ("1", "2-8", ">8")


def _context_class(ctx: tuple) -> str:
    return "1" if len(ctx) == 1 else "2-8" if len(ctx) <= 8 else ">8"


def rows_by_context(original, streamlined, lexer, ga: GrammarAnalysis, contexts: list[tuple[str, ...]]) -> dict:
    """Where the streamlined rows are, by how many labels can precede their configuration,
    and the seed blog's own measure.

    ``classes``: per class of configurations ("1": the label before the lexeme is known,
    "2-8", ">8": judged without context) the configurations, original and streamlined rows,
    streamlined rows whose check reads two labels or more (emitted plus one entered), and
    streamlined rows holding one token.

    ``per_label``: rows keyed by (configuration, preceding label) as the blog's store is (one
    boundary state per terminal): a row counts once for every label that can precede its
    configuration after which its labels are not one-hop impossible (the SynCode test,
    :meth:`GrammarAnalysis.chain_possible`), for the original and the streamlined store (not
    re-streamlined per label)."""
    _, _, name = _label_view(lexer)
    classes = {c: dict(configs=0, original=0, streamlined=0, checks_2plus=0, one_token=0) for c in CONTEXT_CLASSES}
    for q, ctx in enumerate(contexts):
        row = classes[_context_class(ctx)]
        row["configs"] += 1
        row["original"] += len(original.rows[q])
        for e, n, sid in streamlined.rows[q]:
            row["streamlined"] += 1
            row["checks_2plus"] += len(e) + (1 if n else 0) >= 2
            row["one_token"] += (not streamlined.set_negated[sid]) and len(streamlined.set_ids[sid]) == 1
    possible_memo: dict = {}

    def possible(y: str, seq: tuple[str, ...]) -> bool:
        key = (y, seq)
        got = possible_memo.get(key)
        if got is None:
            got = possible_memo[key] = ga.chain_possible(seq, after=y)
        return got

    ctx_ids: dict[tuple, int] = {}
    count_memo: dict = {}

    def count(q: int, e: tuple[int, ...], n: tuple[int, ...]) -> int:
        ctx = contexts[q]
        key = (ctx_ids.setdefault(ctx, len(ctx_ids)), e, n)
        got = count_memo.get(key)
        if got is None:
            seq = tuple(name(x) for x in e)
            got = 0
            for y in ctx:
                if possible(y, seq) and (not n or any(x < 0 or possible(y, seq + (name(x),)) for x in n)):
                    got += 1
            count_memo[key] = got
        return got

    per_label = {}
    for which, store in (("original", original), ("streamlined", streamlined)):
        per_label[which] = sum(count(q, e, n) for q, rows in enumerate(store.rows) for e, n, _ in rows)
    pairs = sum(len(c) for c in contexts)
    return dict(classes=classes, per_label=per_label, config_label_pairs=pairs)


def analyze_grammar(grammar: str | Path, vocab: Vocabulary, *, start: str | None = None,
                    document: str | None = None, document_tokens: list[int] | None = None,
                    tokenizer_name: str = "", cache=True, progress: bool | None = None) -> GrammarReport:
    """Analyse a grammar for a vocabulary; with `document_tokens` (the document as token
    ids) also measure decoding with the original and the streamlined store. `progress`:
    bars on stderr (None, the default: only when stderr is a terminal)."""
    progress = show_progress(progress)
    prof = CompileProfile()
    raw = compile_grammar(grammar, vocab, start=start, cache=cache, progress=progress, streamline=False,
                         profile=prof).load_objects()
    lk = load_lark(grammar, start=start)
    step = _Steps(progress, 7 + (document_tokens is not None))
    step("grammar analysis (never/always legal, LALR game)")
    t0 = time.perf_counter()
    ga = GrammarAnalysis.from_lark(lk, start)
    lr = LRGame(raw.tables)
    analysis_s = time.perf_counter() - t0
    rss: list[float] = []

    def on_streamline_step(msg: str) -> None:
        if msg.endswith("rows"):
            rss.append(_rss_mib())
            step(f"streamlining: {msg}")

    result = streamline(raw.store, raw.lexer, ga, lr=lr, progress=on_streamline_step)
    contexts = result.contexts
    step("one-hop successor baseline (SynCode's pruning)")
    syncode = one_hop_only(raw.store, raw.lexer, ga, contexts)
    names = raw.label_names
    emitted = [n for i, n in enumerate(names) if i not in raw.lexer.spec.ignored]
    n = len(emitted)
    step("successor pairs")
    possible = sum(ga.label_follows(a, b) for a in emitted for b in emitted)
    always_dft = always_lr = always_any = 0
    nl = ga.newline
    for a in step.iter(emitted, "always-legal pairs", unit="terminal"):
        for b in emitted:
            if nl in (a, b):
                continue
            x, y = ga.always_legal(a, (b,)), lr.always(a, (b,))
            always_dft += x
            always_lr += y
            always_any += x or y
    hist: dict[str, int] = {}
    for c in contexts:
        key = "1" if len(c) == 1 else "2-8" if len(c) <= 8 else ">8"
        hist[key] = hist.get(key, 0) + 1
    successors = dict(pairs=n * n, pairs_possible=possible, mean_successors=possible / max(n, 1),
                      always_dft=always_dft, always_lr=always_lr, always_any=always_any, contexts=hist)
    steps = [dict(name=s.name, rows=s.rows, seconds=s.seconds + (analysis_s if i == 1 else 0.0),
                  rss_mib=(rss[i - 1] if 0 < i <= len(rss) else _rss_mib()))
             for i, s in enumerate(result.steps)]
    no_indent: set | None = None
    if raw.indenter is not None:  # the diagnostic only means something with indentation
        no_indent = set()
        for q, rows in enumerate(result.store.rows):
            for e, en, sid in rows:
                no_indent.add((q, tuple(raw.lexer.spec.indent_label if x >= INDENT_BASE else x for x in e), en))
    report = GrammarReport(
        grammar=grammar_source(grammar).name,
        tokenizer=tokenizer_name, vocab_size=vocab.size, terminals=len(lk.terminals), lexer_labels=len(names),
        rules=len(ga.source.rules), nonterminals=len(ga.source.nonterminals), factored_rules=len(ga.grammar.rules),
        lexer_configs=len(raw.store.configs), groups=result.groups,
        group_display=[[_display(lk, n) for n in g] for g in result.groups], successors=successors, steps=steps,
        syncode_rows=syncode, rows_without_indentation=None if no_indent is None else len(no_indent),
        rows_per_config={"original": [len(r) for r in raw.store.rows],
                         "one-hop successors": result.steps[2].rows_per_config,
                         "streamlined": [len(r) for r in result.store.rows]},
        analysis_seconds=analysis_s + sum(s.seconds for s in result.steps),
        compile_phases=[asdict(ph) for ph in prof.phases],
        by_context=rows_by_context(raw.store, result.store, raw.lexer, ga, contexts),
        stored_rows=dict(original=raw.store.n_stored_rows, streamlined=result.store.n_stored_rows))
    report.streamlined = CompiledGrammar(raw.vocab, raw.lexer, result.store, raw.tables, raw.indenter,
                                         raw.grammar_hash, streamlined=True)  # not part of the report's data
    report.original = raw
    if document_tokens is not None:
        slim = report.streamlined
        step(f"decoding the document ({len(document_tokens):,} tokens) with both stores")
        before, _ = decode_stats(raw, document_tokens, "original", progress=progress)
        after, same = decode_stats(slim, document_tokens, "streamlined", compare=raw, progress=progress)
        report.decode = [before, after]
        report.identical_masks = same
        report.document = document or "document"
    step.close()
    return report
