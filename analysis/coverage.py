"""The copy ceiling: how much of each gold output copy ops can produce, and the
wall-clock bound that follows from a measured kernel speedup curve."""

from __future__ import annotations

import csv
import shlex
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cad_outlines.edits import Copy, Gen, number_lines, oracle_program, split_lines
from cad_outlines.edits.metrics import (KernelCurve, SuffixAutomaton, approx_token_offsets, copy_coverage,
                                        greedy_token_cover, speedup_bound)
from cad_outlines.edits.resolve import resolve_op

from .datasets import (LENGTH_BUCKETS, OVER, REPO, add_corpus_arguments, changed_fraction, corpora_from_args, report_stem,
                       corpus_argv, length_bucket, sample_by_bucket, shared_data_dir)
from .formats import LABELS as FORMAT_LABELS, add_format_argument, format_argv, format_programs, method_label, parse_formats
from .report import markdown_table, pct, write_report

DESCRIPTION = "copy ceiling: line-level and token-level copy coverage, tag costs, wall-clock bound"
DEFAULT = ["humanevalfix-python", "humanevalfix-js", "editeval"]
MIN_SPANS = (1, 2, 4, 8, 16, 32)
DEFAULT_KERNEL_CSV = REPO / "docs" / "results" / "kernel_speedup.csv"
NO_CSV = "n/a (no kernel CSV)"

Encoder = Callable[[str], tuple[list[int], list[tuple[int, int]]]]

PAPER = """Paper (Copy-as-Decode, arXiv 2604.18170, Qwen2.5 tokenizer, A100 7B bf16 kernel); the abstract lists its
corpora as ProbeEdit and HumanEvalPack-Fix Py/JS, and the mapping of numbers to corpora below is inferred from
that order. ProbeEdit is not available here: our third corpus is EditEval, a different (heavier-rewrite) set.

| paper corpus | line-level ceiling | wall-clock bound |
|---|---|---|
| ProbeEdit | 97.8% | 29.0x |
| HumanEvalPack-Fix Py | 74.1% | 3.4x |
| HumanEvalPack-Fix JS | 78.8% | 4.2x |
| pooled | - | 13.0x |

Token-level extension: 91-99% coverage. Tag vs new-content cost of line-level oracle programs on HumanEvalFix-Py
(per the brief): 3,326 tag tokens vs 2,281 gen-content tokens."""



def load_encoder(spec: str | None) -> tuple[str, Encoder]:
    """(name, encode): encode(text) -> (token ids, char offsets), no special tokens. `spec`
    is a tokenizer.json file or a folder holding one (default: the shared Qwen2.5), or
    ``approx`` for the tokenizer-free estimate (ids interned per run)."""
    if spec == "approx":
        vocab: dict[str, int] = {}

        def encode_approx(text: str) -> tuple[list[int], list[tuple[int, int]]]:
            offsets = approx_token_offsets(text)
            return [vocab.setdefault(text[a:b], len(vocab)) for a, b in offsets], offsets

        return "approx (tokenizer-free estimate)", encode_approx
    from tokenizers import Tokenizer

    path = Path(spec) if spec else shared_data_dir() / "tokenizers" / "qwen2.5"
    if path.is_dir():
        path = path / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))

    def encode(text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = tok.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets

    return path.parent.name, encode


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def read_kernel_curves(path: str | Path, select: str | None = None) -> dict[str, KernelCurve]:
    """Speedup curves from a CSV with columns ``n`` and ``speedup`` (others allowed).
    `select` ("key=value,...") keeps matching rows; the rows left are grouped into one
    curve per combination of their non-numeric columns (repeated N: median)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"n", "speedup"} <= set(rows[0]):
        raise SystemExit(f"{path}: need columns n and speedup (got {list(rows[0]) if rows else 'no rows'})")
    columns = list(rows[0])
    for pair in filter(None, (select or "").split(",")):
        key, _, value = pair.partition("=")
        if key not in columns:
            raise SystemExit(f"--kernel-select: no column {key!r} in {path} (columns: {', '.join(columns)})")
        rows = [r for r in rows if r[key] == value]
    if not rows:
        raise SystemExit(f"--kernel-select {select!r} matches no row of {path}")

    keys = [c for c in rows[0] if c not in ("n", "speedup") and not all(_is_number(r[c]) for r in rows)]
    groups: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        label = ",".join(f"{k}={r[k]}" for k in keys) or "kernel"
        groups.setdefault(label, {}).setdefault(float(r["n"]), []).append(float(r["speedup"]))
    return {label: KernelCurve.from_points((n, statistics.median(s)) for n, s in pts.items())
            for label, pts in groups.items()}


@dataclass
class Cost:
    """One way of writing edits (regeneration, the CaD program, an edit format), summed over the
    cases it can write: output tokens, the CaD program's tokens on the same cases and the cases
    where it is shorter; with a tracer (:class:`~analysis.format_costs.Tracer`), the tokens the
    model chooses under its constraint (the rest forced; the end token included where the model
    chooses it) and the forwards after the prompt, else None."""

    cases: int = 0
    tokens: int = 0
    cad_tokens: int = 0
    shorter: int = 0
    chosen: int | None = None
    forwards: int | None = None

    def add(self, other: Cost) -> None:
        first = not self.cases
        for key in ("cases", "tokens", "cad_tokens", "shorter"):
            setattr(self, key, getattr(self, key) + getattr(other, key))
        for key in ("chosen", "forwards"):  # None once any case has none
            mine, theirs = getattr(self, key), getattr(other, key)
            setattr(self, key, theirs if first else None if mine is None or theirs is None else mine + theirs)


@dataclass
class Tally:
    """Sums over cases (per corpus, or pooled)."""

    cases: int = 0
    out_tokens: int = 0
    line_covered: int = 0
    token_covered: dict[int, int] = field(default_factory=lambda: dict.fromkeys(MIN_SPANS, 0))
    program_tokens: int = 0
    content_tokens: int = 0
    copy_tokens: list[int] = field(default_factory=list)
    doc_tokens: int = 0  # the input document, plain (the diff formats' prompts hold it so)
    numbered_tokens: int = 0  # the input document with its line numbers (CaD's prompt holds it so)
    # what each way of writing the edit costs: "regen", "copy" (the CaD program) and each edit format
    costs: dict[str, Cost] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.cases += other.cases
        self.out_tokens += other.out_tokens
        self.line_covered += other.line_covered
        for m in MIN_SPANS:
            self.token_covered[m] += other.token_covered[m]
        self.program_tokens += other.program_tokens
        self.content_tokens += other.content_tokens
        self.copy_tokens += other.copy_tokens
        self.doc_tokens += other.doc_tokens
        self.numbered_tokens += other.numbered_tokens
        for name, cost in other.costs.items():
            self.costs.setdefault(name, Cost()).add(cost)

    def bounds(self, curve: KernelCurve) -> tuple[float, float]:
        """(bound, tags-free bound): generated cost T_gen, or gen content alone."""
        return tuple(speedup_bound(self.out_tokens, gen, self.copy_tokens, curve)
                     for gen in (self.program_tokens, self.content_tokens))


def case_tally(before: str, after: str, encode: Encoder, formats: Sequence[str] = (), trace=None) -> Tally:
    """Coverage and cost counts of one case (its max-copy oracle program, real tokens), and what
    regeneration, the CaD program and the oracle program in each of `formats` (analysis.formats)
    cost; with `trace` (a :class:`~analysis.format_costs.Tracer`), the tokens each chooses and its
    forwards too."""
    count = lambda text: len(encode(text)[0])  # noqa: E731
    program = oracle_program(before, after, count_tokens=count)
    out_ids, offsets = encode(after)
    src_ids = encode(before)[0]
    sam = SuffixAutomaton(src_ids)
    lines = split_lines(before)
    program_tokens = count(program.to_text(header=False))
    programs = {"copy": program.to_text(header=False), **format_programs(before, after, list(formats))}
    # regeneration: every token and the end token chosen, a forward per token (the last predicts the end)
    costs = {"regen": Cost(1, len(out_ids), program_tokens, 0, len(out_ids) + 1, len(out_ids))}
    for name, text in programs.items():
        if text is None:  # a line format cannot write a change of the final newline alone
            continue
        n = count(text)
        chosen, forwards = trace(before, text, name) if trace else (None, None)
        costs[name] = Cost(1, n, program_tokens, int(n < program_tokens), chosen, forwards)
    return Tally(
        cases=1,
        out_tokens=len(out_ids),
        line_covered=copy_coverage(program, before, offsets)[0],
        token_covered={m: sum(n for _, n in greedy_token_cover(sam, out_ids, m)) for m in MIN_SPANS},
        program_tokens=program_tokens,
        content_tokens=sum(len(encode(op.text)[0]) for op in program.ops if isinstance(op, Gen)),
        copy_tokens=[len(encode(resolve_op(op, lines))[0]) for op in program.ops if isinstance(op, Copy)],
        doc_tokens=len(src_ids),
        numbered_tokens=count(number_lines(before)),
        costs=costs,
    )


def bucket(n: int) -> str:
    """Power-of-two bucket label: 1, 2-3, 4-7, ..."""
    lo = 1 << (n.bit_length() - 1)
    return "1" if lo == 1 else f"{lo}-{2 * lo - 1}"


def tables(tallies: dict[str, Tally], curves: dict[str, KernelCurve]) -> tuple[str, str, str]:
    """(coverage table, cost/bound table, copy-span histogram) as Markdown."""
    cov = markdown_table(
        ["corpus", "cases", "output tokens", "line-level"] + [f"token m={m}" for m in MIN_SPANS],
        [(name, t.cases, t.out_tokens, pct(t.line_covered / max(t.out_tokens, 1)))
         + tuple(pct(t.token_covered[m] / max(t.out_tokens, 1)) for m in MIN_SPANS) for name, t in tallies.items()])
    bound_cols = [f"{kind} ({label})" for label in curves for kind in ("bound", "tags-free")] or ["bound"]
    cost = markdown_table(
        ["corpus", "output tokens T", "program tokens T_gen", "tag tokens", "gen-content tokens", "copy ops",
         "copied tokens"] + bound_cols,
        [(name, t.out_tokens, t.program_tokens, t.program_tokens - t.content_tokens, t.content_tokens,
          len(t.copy_tokens), sum(t.copy_tokens))
         + (tuple(f"{b:.2f}x" for c in curves.values() for b in t.bounds(c)) or (NO_CSV,))
         for name, t in tallies.items()])
    top = max((n for t in tallies.values() for n in t.copy_tokens), default=1)
    labels = list(dict.fromkeys(bucket(1 << b) for b in range(top.bit_length())))
    hist = markdown_table(
        ["corpus"] + labels,
        [(name,) + tuple(sum(bucket(n) == b for n in t.copy_tokens) for b in labels) for name, t in tallies.items()])
    return cov, cost, hist


def format_table(tallies: dict[str, Tally]) -> str:
    """What each way of writing the edits costs, per report row: regeneration, the CaD program
    and each edit format's oracle program: output tokens, against the CaD program on the same cases
    (a line format cannot write a change of the final newline alone), the share of cases where it
    is shorter; with a trace, the tokens chosen under the constraint (unconstrained: all) and
    the forwards after the prompt, constrained and unconstrained (one per token)."""
    rows = []
    for group, t in tallies.items():
        for name, c in t.costs.items():
            rows.append((group, method_label(name, {**FORMAT_LABELS, "regen": "full regeneration", "copy": "CaD program"}),
                         c.cases, f"{t.numbered_tokens if name == 'copy' else t.doc_tokens:,}", f"{c.tokens:,}", f"{c.tokens / max(c.cad_tokens, 1):.2f}x",
                         "-" if name == "copy" else f"{c.shorter / max(c.cases, 1):.0%}",
                         "-" if c.chosen is None else f"{c.chosen:,}",
                         "-" if c.forwards is None or name == "regen" else f"{c.forwards:,}",
                         "-" if name == "copy" else f"{c.tokens:,}"))
    return markdown_table(["corpus", "method", "cases", "document in the prompt (tokens)", "output tokens", "x CaD program", "shorter than CaD",
                           "tokens chosen (constrained)", "forwards (constrained)", "forwards (unconstrained)"], rows)


def plot(tallies: dict[str, Tally], path: Path) -> None:
    """Grouped bars: line-level and token-level cover per m, one group per corpus."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = ["line-level"] + [f"token m={m}" for m in MIN_SPANS]
    fig, ax = plt.subplots(figsize=(max(8, 2.4 * len(tallies)), 5))
    width = 0.8 / len(series)
    for i, label in enumerate(series):
        vals = [100 * (t.line_covered if i == 0 else t.token_covered[MIN_SPANS[i - 1]]) / max(t.out_tokens, 1)
                for t in tallies.values()]
        ax.bar([g + (i - (len(series) - 1) / 2) * width for g in range(len(tallies))], vals, width, label=label)
    ax.set_xticks(range(len(tallies)), list(tallies))
    ax.set_ylabel("gold output tokens covered (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    ax.set_title("Copy ceiling: line-level oracle vs token-level greedy cover")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_by_length(points: list[tuple[int, float, float]], curve_label: str, path: Path) -> None:
    """Per-case closed-form bound against document length and changed fraction; `points`
    holds (lines before, changed fraction, bound) of each case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    bounds = [b for _, _, b in points]
    for ax, xs, label in ((axes[0], [n for n, _, _ in points], "document length (lines before)"),
                          (axes[1], [max(f, 1e-4) for _, f, _ in points], "changed fraction of the document's lines")):
        ax.scatter(xs, bounds, s=10, alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xlabel(label)
    for lo, _ in list(LENGTH_BUCKETS.values())[1:]:
        axes[0].axvline(lo, color="gray", lw=0.6, ls=":")
    axes[0].set_ylabel("closed-form speedup bound (per case)")
    fig.suptitle(f"Copy-as-Decode bound per case ({curve_label})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, DEFAULT)
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer.json or a folder with one (default: shared qwen2.5); 'approx' for the "
                             "tokenizer-free estimate")
    parser.add_argument("--kernel-csv", default=str(DEFAULT_KERNEL_CSV),
                        help="kernel speedup CSV (columns n, speedup, any others)")
    parser.add_argument("--kernel-select", default=None, metavar="KEY=VALUE,...",
                        help="keep only CSV rows matching these columns (one curve)")
    parser.add_argument("--limit", type=int, default=None,
                        help="long-file corpora (commits) only: a seeded sample of this many cases per length bucket "
                             "(default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    add_format_argument(parser)
    parser.add_argument("--no-trace", action="store_true",
                        help="skip the tokens chosen and forwards of each way of writing the edit (a model-free "
                             "teacher-forced trace of every program under its constraint)")


def format_section(table: str, traced: bool) -> str:
    """The report's section on what each way of writing the edits costs."""
    return ("**Edit formats** (`docs/edit_formats.md`): output tokens of full regeneration, the CaD program and "
            "each format's oracle program (minimal hunks, old lines widened until unique in the file; tokenized as "
            "the model writes it after the prompt's header), against the CaD program on the cases that format can "
            "write (a line format cannot write a change of the final newline alone), and the share of those cases "
            "where it is shorter. "
            + ("Tokens chosen: the tokens the model decides under the grammar and, for a format, the document "
               "constraint, the end token included where the model chooses it (the rest are forced, e.g. a search "
               "line once its prefix is unique; regeneration and unconstrained runs choose every token and the "
               "end); forwards after the prompt: constrained, a chosen token, the forced run after it and a copy's "
               "lines share one; unconstrained, one per token (the last one predicts the end). Both from the "
               "model-free trace of each program under its constraint (`analysis.format_costs`, the decode loop's "
               "masks and forced runs). " if traced else "No trace (`--no-trace`): tokens chosen and forwards not "
               "counted. ")
            + "The CaD prompt holds the numbered document, the others the plain one (all cases of the row).\n\n"
            + table + "\n\n")


CHANGED_BINS = (0.002, 0.005, 0.01, 0.02, 0.05)


def by_changed_fraction(points: list[tuple[int, float, float]]) -> str:
    """The per-case bound of long-file cases binned by the changed fraction of their lines:
    cases, median, min and max per bin, and the share of cases at 5x and 10x or more."""
    edges = [0.0, *CHANGED_BINS, float("inf")]
    rows = []
    for lo, hi in zip(edges, edges[1:]):
        bounds = [b for _, f, b in points if lo <= f < hi]
        if bounds:
            label = f"{pct(lo)} - {pct(hi)}" if hi != float("inf") else f">= {pct(lo)}"
            rows.append([label, len(bounds), f"{statistics.median(bounds):.1f}x", f"{min(bounds):.1f}x",
                         f"{max(bounds):.1f}x"])
    n = len(points)
    share = ", ".join(f"{sum(b >= k for *_, b in points) / n:.0%} of cases at {k}x or more" for k in (5, 10))
    return (f"Per-case bound by the changed fraction of the document's lines ({n} cases; median changed fraction "
            f"{pct(statistics.median(f for _, f, _ in points))}; {share}):\n\n"
            + markdown_table(["changed lines", "cases", "median bound", "min", "max"], rows))


def run(args) -> int:
    tok_name, encode = load_encoder(args.tokenizer)
    formats = parse_formats(args.formats)
    trace = None
    if not args.no_trace and args.tokenizer != "approx":
        from .format_costs import Tracer

        trace = Tracer(Path(args.tokenizer) if args.tokenizer else shared_data_dir() / "tokenizers" / "qwen2.5")
    curves = read_kernel_curves(args.kernel_csv, args.kernel_select) if Path(args.kernel_csv).is_file() else {}
    if not curves:
        print(f"no kernel CSV at {args.kernel_csv}: bound columns say {NO_CSV!r}")
    tallies: dict[str, Tally] = {}
    pooled = Tally()
    curve = next(iter(curves.values()), None)
    points: list[tuple[int, float, float]] = []  # long-file corpora: (lines, changed fraction, bound) per case
    sizes: dict[str, str] = {}
    for corpus in corpora_from_args(args):
        tally = Tally()
        by_bucket: dict[str, Tally] = {label: Tally() for label in [*LENGTH_BUCKETS, OVER]}
        cases = sample_by_bucket(corpus, args.limit, f"{args.seed}:{corpus.name}") if corpus.bucketed else corpus
        sizes[corpus.name] = f"{len(cases)} of {len(corpus)}"
        for case in cases:
            one = case_tally(case.before, case.after, encode, formats, trace)
            tally.add(one)
            if corpus.bucketed:
                by_bucket[length_bucket(case.lines_before)].add(one)
                if curve is not None:
                    points.append((case.lines_before, changed_fraction(case), one.bounds(curve)[0]))
        tallies[corpus.name] = tally
        if corpus.bucketed:
            tallies.update({f"{corpus.name} {label}": t for label, t in by_bucket.items() if t.cases})
        pooled.add(tally)
    tallies["pooled"] = pooled
    cov, cost, hist = tables(tallies, curves)
    by_format = format_table(tallies)
    print(cov, cost, hist, by_format, sep="\n\n")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = report_stem(args, "coverage", DEFAULT)
    plot(tallies, out / f"{name}.png")
    length_note = ""
    if points:
        plot_by_length(points, next(iter(curves)), out / f"{name}_length.png")
        length_note = ("Per case (long-file corpora), the bound against document length and the changed fraction of "
                       f"its lines (first kernel curve):\n\n![coverage by length]({name}_length.png)\n\n"
                       + by_changed_fraction(points) + "\n")
    shown = Path(args.kernel_csv).resolve()
    shown = shown.relative_to(REPO) if shown.is_relative_to(REPO) else shown  # no checkout path in the report
    kernel = (f"Kernel curve(s) from `{shown}`"
              + (f" (selected `{args.kernel_select}`)" if args.kernel_select else "") + ": s(N) linear in log N "
              "between measured points, clamped outside, anchored at s(1) = 1 when the table has no N <= 1."
              if curves else f"No kernel CSV at `{shown}`: bounds are {NO_CSV}.")
    body = f"""Tokenizer: {tok_name}. Cases: {", ".join(f"{n} {k}" for k, n in sizes.items())}{
        f" (long-file corpora: a seeded sample of {args.limit} per length bucket, seed {args.seed})"
        if args.limit is not None else ""}. Pooled = sums over all cases of all corpora (not a mean of ratios). Rows
`NAME <200`, `NAME 200-500`, `NAME 500-1,500` are a long-file corpus's document-length buckets (lines before the
edit), each summed over its cases.

**Line-level** = tokens of the gold `after` lying wholly inside text produced by copy ops of the max-copy oracle
program (`oracle_program`, tag costs counted in this tokenizer); a token straddling a copy/gen boundary counts as
generated. **Token m=k** = greedy left-to-right cover of the gold output token ids by the longest runs found
contiguously in the input token ids (`greedy_token_cover`), keeping runs of at least k tokens.

{cov}

**Cost and bound.** T = gold output tokens (full regeneration). T_gen = tokens of `program.to_text(header=False)`
tokenized as one text: op tags, separators, gen text and `</program>`. Gen-content tokens = gen op texts tokenized
standalone; tag tokens = T_gen - gen-content. N_k = tokens of copy op k's text tokenized standalone. Bound =
T / (T_gen + sum_k N_k / s(N_k)); tags-free = the same with gen-content tokens in place of T_gen (op tags
free, for comparison with bounds that ignore them). {kernel}

{cost}

{format_section(by_format, trace is not None)}**Copy-span lengths** (N_k, tokens), number of copy ops per bucket:

{hist}

{PAPER}

![coverage]({name}.png)

{length_note}"""
    extra = [w for k in ("tokenizer", "kernel_select") if getattr(args, k) for w in (f"--{k.replace('_', '-')}",
                                                                                        getattr(args, k))]
    if args.limit is not None:
        extra += ["--limit", str(args.limit)] + (["--seed", str(args.seed)] if args.seed else [])
    extra += format_argv(formats) + (["--no-trace"] if args.no_trace else [])
    if Path(args.kernel_csv).resolve() != DEFAULT_KERNEL_CSV.resolve():
        extra += ["--kernel-csv", args.kernel_csv]
    path = write_report(out, name, "Copy ceiling and wall-clock bound", body,
                        shlex.join(["cad-outlines", "study", "coverage", *corpus_argv(args), *extra]))
    print(f"wrote {path} and {out / f'{name}.png'}")
    return 0
