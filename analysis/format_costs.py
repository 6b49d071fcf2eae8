"""The cost model of the edit formats under the grammar and the document constraint: for each format's
oracle program of real edits, the tokens the model must choose, the tokens forced (grammar structure,
and search text once one candidate is left), and the forwards after the prompt, with a real tokenizer
and no model (the decisions of a teacher-forced run depend only on the masks). Per search line: the
decisions spent on it, against the tokens it takes to write it. Also the time the document constraint
takes per decision (its mask and forced-run work, on this CPU).

The trace is the decode loop's (:mod:`cad_outlines.generators.copy_decode`) without the forwards:
the same forced runs (:func:`~cad_outlines.decoding.program_trackers.forced_run`), the same masks,
and forwards counted as the loop makes them (a chosen token, the forced run after it and a copy's lines
in one forward, none after the program's last token); tests/analysis checks it against the loop."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from cad_outlines.decoding.encoding import TokenEncoder
from cad_outlines.decoding.program_trackers import forced_run, tracker_for
from cad_outlines.edits.formats import EDIT_FORMATS, InexpressibleEditError, get_format
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.matcher import Matcher
from cad_outlines.grammars import grammar_path

from .datasets import (LENGTH_BUCKETS, add_corpus_arguments, corpora_from_args, corpus_argv, length_bucket, report_stem,
                       sample_by_bucket, shared_data_dir)
from .report import markdown_table, write_report

DESCRIPTION = "edit formats' cost model: decisions, forced tokens and forwards per program and per search line"
DEFAULT = ["commits"]


@dataclass
class Trace:
    """What a teacher-forced run of one program costs (no model)."""

    program_tokens: int = 0  # the tokenizer's own tokenization of the program text (unconstrained decoding)
    decisions: int = 0  # tokens the model must choose (EOS included where the program ends with it)
    forced: int = 0  # tokens fast-forwarded (no choice)
    forwards: int = 0  # forwards after the prompt
    search_lines: int = 0  # old lines of the hunks (search, context, removed text)
    search_tokens: int = 0  # tokens of those lines in the program, as the tokenizer writes them
    search_decisions: int = 0  # decisions on search text (a line's tokens, and the choice to go on with one)
    constraint_s: float = 0.0  # document constraint: masks and forced runs


def _on_old_text(tracker, data: bytes) -> bool:
    """Whether a token with bytes `data`, chosen in the tracker's state, writes search text."""
    constraint = getattr(tracker, "constraint", None)
    if constraint is None or not data:
        return False
    sec, q = constraint.state[0], constraint.state[1]
    if sec == "s":  # a search/replace SEARCH line (not its divider) or a str_replace old_str (not its end)
        if constraint.format == "search_replace":
            return not (q + data).startswith(b"=======")
        return data[:1] != b'"' or constraint.state[4] != ""
    if sec == "c":
        return True
    return sec == "h" and data[:1] in (b" ", b"-")  # a udiff/apply_patch line that goes on with old text


def trace_program(fmt: str, document: str, text: str, grammar, encoder: TokenEncoder) -> Trace:
    """The decisions, forced tokens and forwards of teacher-forcing `text` in format `fmt`."""
    vocab = grammar.vocab
    tracker = tracker_for(fmt, document, vocab, constrained=True, monotonic=False, token_text=[None] * vocab.size,
                          lt_tokens=np.zeros(0, dtype=np.int64))
    m = Matcher(grammar)
    eos = min(vocab.eos_token_ids)
    data = text.encode("utf-8")
    out = Trace(program_tokens=len(encoder.encode(text)) + (fmt != "copy"))
    pos = 0
    pending = False
    while not tracker.done:
        t0 = time.perf_counter()
        mask = m.allowed_mask()
        forced = forced_run(m, tracker, encoder, mask)
        if not forced:
            mask = tracker.filter(mask)
        out.constraint_s += time.perf_counter() - t0
        if forced:
            m.advance_many(forced)
            step = b"".join(vocab.token_bytes[t] for t in forced)
            tracker.feed(step, step.decode("utf-8", "replace"))
            out.forced += len(forced)
            pos += len(step)
            pending = True
            continue
        if tracker.ends_with_eos and mask[eos] and mask.sum() == 1:
            break  # only EOS: the program ends without a choice
        out.forwards += pending
        out.decisions += 1
        if pos == len(data):
            if not tracker.ends_with_eos:
                raise ValueError("the program ended before its end marker")
            break
        tok = encoder.next_token(data, pos)
        if not mask[tok]:
            raise ValueError(f"the program is refused at byte {pos}: {data[pos:pos + 40]!r}")
        step = vocab.token_bytes[tok]
        out.search_decisions += _on_old_text(tracker, step)
        m.advance(tok)
        tracker.feed(step, step.decode("utf-8", "replace"))
        pos += len(step)
        pending = True
    return out


def _search_lines(fmt: str, program) -> tuple[int, list[str]]:
    """The old lines of a program's hunks, as text lines."""
    if fmt == "copy":
        return 0, []
    lines = []
    for hunk in program.hunks:
        lines += hunk.old if fmt != "str_replace" else [u.rstrip("\n") for u in hunk.old]
    return len(lines), lines


class Tracer:
    """:func:`trace_program` with one tokenizer (a folder, or a tokenizer.json in one) and each
    format's grammar compiled for it on first use: ``tracer(document, text, fmt)`` -> (decisions,
    forwards); its :attr:`encoder` and :meth:`grammar` for callers that want the whole trace."""

    def __init__(self, path):
        from pathlib import Path

        from transformers import AutoTokenizer

        from cad_outlines.engine.vocabulary import Vocabulary

        path = Path(path)
        path = path.parent if path.name == "tokenizer.json" else path
        self.vocab = Vocabulary.from_tokenizer(str(path))
        self.encoder = TokenEncoder(AutoTokenizer.from_pretrained(str(path)), self.vocab)
        self._grammars: dict = {}

    def grammar(self, fmt: str):
        if fmt not in self._grammars:
            self._grammars[fmt] = compile_grammar(grammar_path(get_format(fmt).grammar), self.vocab, progress=None)
        return self._grammars[fmt]

    def trace(self, fmt: str, document: str, text: str) -> Trace:
        return trace_program(fmt, document, text, self.grammar(fmt), self.encoder)

    def __call__(self, document: str, text: str, fmt: str) -> tuple[int, int]:
        tr = self.trace(fmt, document, text)
        return tr.decisions, tr.forwards


@dataclass
class Tally:
    cases: int = 0
    inexpressible: int = 0
    t: Trace = field(default_factory=Trace)

    def add(self, tr: Trace) -> None:
        self.cases += 1
        for k in tr.__dataclass_fields__:
            setattr(self.t, k, getattr(self.t, k) + getattr(tr, k))


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, DEFAULT)
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the shared Qwen2.5)")
    parser.add_argument("--formats", default=",".join(EDIT_FORMATS), help="comma-separated formats (default: all)")
    parser.add_argument("--per-bucket", type=int, default=None,
                        help="cases per length bucket (default: every case)")
    parser.add_argument("--out", default="docs/results", help="report folder (default: docs/results)")


def run(args) -> int:
    path = args.tokenizer or str(shared_data_dir() / "tokenizers" / "qwen2.5")
    tracer = Tracer(path)
    encoder = tracer.encoder
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    for f in formats:
        tracer.grammar(f)
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    cases = [c for corpus in corpora_from_args(args, DEFAULT) for c in corpus]
    if args.per_bucket:
        cases = sample_by_bucket(cases, args.per_bucket, "format-costs")
    t0 = time.perf_counter()
    for i, case in enumerate(cases):
        bucket = length_bucket(case.lines_before)
        for f in formats:
            fmt = get_format(f)
            try:
                program = fmt.oracle(case.before, case.after)
            except InexpressibleEditError:
                tallies[(f, bucket)].inexpressible += 1
                continue
            text = fmt.render(program)
            tr = tracer.trace(f, case.before, text)
            tr.search_lines, lines = _search_lines(f, program)
            tr.search_tokens = sum(len(encoder.encode(line + "\n")) for line in lines)
            tallies[(f, bucket)].add(tr)
            tallies[(f, "all")].add(tr)
        if (i + 1) % 50 == 0:
            print(f"{i + 1}/{len(cases)} cases, {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    for f in formats:
        for bucket in ["all"] + [b for b in LENGTH_BUCKETS if (f, b) in tallies]:
            ta = tallies.get((f, bucket))
            if ta is None or not ta.cases:
                continue
            t = ta.t
            per_line = f"{t.search_decisions / t.search_lines:.2f}" if t.search_lines else "-"
            tok_line = f"{t.search_tokens / t.search_lines:.1f}" if t.search_lines else "-"
            rows.append([f, bucket, ta.cases, ta.inexpressible, f"{t.program_tokens:,}", f"{t.decisions:,}",
                         f"{t.forced:,}", f"{t.forwards:,}", f"{t.decisions / t.program_tokens:.2f}",
                         f"{t.search_lines:,}", tok_line, per_line,
                         f"{1000 * t.constraint_s / max(t.decisions, 1):.2f}"])
    header = ["format", "lines", "cases", "cannot write", "program tokens", "decisions", "forced", "forwards",
              "decisions / tokens", "search lines", "tokens / search line", "decisions / search line",
              "constraint ms / decision"]
    table = markdown_table(header, rows)
    print(table)
    command = "cad-outlines study format-costs " + " ".join(corpus_argv(args)) + (
        f" --per-bucket {args.per_bucket}" if args.per_bucket else "") + (
        f" --formats {args.formats}" if args.formats != ",".join(EDIT_FORMATS) else "")
    body = f"""Tokenizer: `{path}`. Each format's oracle program (minimal hunks, search text widened until unique in the
file) teacher-forced under its grammar and the document constraint, without a model: **decisions** are the tokens
the model must choose (EOS included for the formats that end with it), **forced** the tokens that enter without a
choice (grammar structure; for the diff formats also search text once one candidate is left), **forwards** the
forwards after the prompt (a chosen token and the forced run after it share one; for copy, a copy's lines too).
**Program tokens** are the program as the tokenizer writes it: what decoding it without the constraint costs, a
decision and a forward each. Per search line (old lines: search, context and removed text): the tokens it takes
to write, and the decisions the model still makes on it (the tokens before one candidate is left, and the choice
to go on with a next line). **Constraint ms / decision**: the document constraint's masks and forced runs (and
the grammar's) per decision on this CPU. "Cannot write": edits of the final newline only (line formats).

{table}
"""
    report = write_report(args.out, report_stem(args, "format_costs", DEFAULT), "Edit formats: the cost model",
                          body, command)
    print(f"wrote {report}")
    return 0
