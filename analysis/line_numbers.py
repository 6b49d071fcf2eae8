"""Line numbers in Copy-as-Decode's prompt: what each line's number costs on every shipped
tokenizer, per rendering, and how much longer the numbered prompt is than the plain one.

A copy op names lines by number, so the prompt shows every line's full number (a model must
never count lines); only how the number is written is free. Each rendering below writes the
full number of every line and nothing is lost (the document can be read back exactly). Per
tokenizer and rendering, summed over the corpus's documents:

* number cost per line = (tokens of ``"Document:\\n" + numbered document`` - tokens of
  ``"Document:\\n" + document``) / lines: the number and its separator, and whatever they
  change in how the line's own text is tokenized;
* numbered / plain = the ratio of those two token counts (the issue's "1.57x" is this ratio
  for ``NNN | `` with Qwen2.5 on ``commits``);
* digits per line = the decimal digits of the line numbers: Qwen2.5, StarCoder and the
  SentencePiece vocabularies (Phi-3, Llama-2) spell a number one token per digit, so no
  rendering that writes the full number costs less than this there.

Then, with Qwen2.5 and its chat template, per document-length bucket: the numbered document against
the plain one, ``build_prompt`` (the Copy-as-Decode prompt: its instructions and the numbered
document) against the same prompt holding the plain document, and against ``regen_prompt`` (the
baselines' shorter instructions and the plain document).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from cad_outlines.edits.lines import number_lines, split_lines, unnumber_lines

from .datasets import LENGTH_BUCKETS, OVER, add_corpus_arguments, corpora_from_args, corpus_argv, length_bucket, \
    report_stem, sample_by_bucket, shared_data_dir
from .report import markdown_table, write_report

DESCRIPTION = "line numbers in the CaD prompt: tokens per line per tokenizer and rendering; prompt ratio"
DEFAULT = ["commits"]
TOKENIZERS = {"Qwen2.5": "qwen2.5", "GPT-2": "gpt2", "Llama-3": "llama3", "StarCoder": "starcoder",
              "Phi-3": "phi3_mini", "Llama-2": "llama2_sentencepiece"}
PREFIX = "Document:\n"


def _numbered(fmt: str, *, pad: bool = False, bare_empty: bool = False) -> Callable[[str], str]:
    """A rendering: `fmt` (with ``{n}``) before every line, the number right-aligned to the
    widest when `pad`, and an empty line as its number alone when `bare_empty`. A last line
    without an ending gets one (these candidates are priced on the lines; the library's
    rendering marks it)."""

    def render(text: str) -> str:
        lines = split_lines(text)
        width = len(str(len(lines))) if pad else 0
        out = []
        for i, line in enumerate(lines, 1):
            body = line if line.endswith("\n") else line + "\n"
            num = f"{i:>{width}}"
            out.append(num + body if bare_empty and body in ("\n", "\r\n") else fmt.format(n=num) + body)
        return "".join(out)

    return render


DEFAULT_RENDERING = "`N text`, empty line `N` (the default)"
RENDERINGS: dict[str, Callable[[str], str]] = {
    DEFAULT_RENDERING: number_lines,
    "`NNN \\| text`, padded (before issue 31)": _numbered("{n} | ", pad=True),
    "`N \\| text`": _numbered("{n} | "),
    "`N: text`": _numbered("{n}: "),
    "`N:text` (grep -n)": _numbered("{n}:"),
    "`N\\|text`": _numbered("{n}|"),
    "`NNN<tab>text`, padded (cat -n)": _numbered("{n}\t", pad=True),
    "`N<tab>text`": _numbered("{n}\t"),
    "`N text`, empty line `N `": _numbered("{n} "),
}


def load_counter(folder: Path) -> Callable[[str], int]:
    """text -> its token count (no special tokens) with the tokenizer in `folder`
    (tokenizer.json, or a SentencePiece tokenizer.model)."""
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        return lambda text: len(tok.encode(text, add_special_tokens=False).ids)
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    return lambda text: len(sp.encode(text))


def digits_per_line(docs: list[str]) -> float:
    """The decimal digits of the documents' line numbers, per line."""
    lines = [len(split_lines(d)) for d in docs]
    return sum(len(str(i)) for n in lines for i in range(1, n + 1)) / sum(lines)


def tokenizer_rows(count: Callable[[str], int], docs: list[str]) -> tuple[float, list[tuple[str, float, float]]]:
    """(plain tokens per line, [(rendering, number tokens per line, numbered/plain)])."""
    lines = sum(len(split_lines(d)) for d in docs)
    plain = sum(count(PREFIX + d) for d in docs)
    rows = []
    for name, render in RENDERINGS.items():
        numbered = sum(count(PREFIX + render(d)) for d in docs)
        rows.append((name, (numbered - plain) / lines, numbered / plain))
    return plain / lines, rows


def prompt_rows(cases, tokenizer) -> list[tuple]:
    """Per length bucket (and all): cases, lines, number tokens per line, and the token ratios of
    the numbered document to the plain one, of ``build_prompt`` to the same prompt holding the plain
    document, and of ``build_prompt`` to ``regen_prompt`` (the baselines' instructions)."""
    from cad_outlines.decoding.prompt import build_prompt

    from .generator import regen_prompt

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    sums: dict[str, list[int]] = {}
    for case in cases:
        numbered = number_lines(case.before)
        cad = build_prompt(tokenizer, case.before, case.instruction)
        values = (1, case.lines_before, count(PREFIX + case.before), count(PREFIX + numbered), count(cad),
                  count(cad.replace(numbered, case.before)), count(regen_prompt(tokenizer, case.before, case.instruction)))
        for key in (length_bucket(case.lines_before), "all"):
            acc = sums.setdefault(key, [0] * len(values))
            for k, v in enumerate(values):
                acc[k] += v
    order = [*LENGTH_BUCKETS, OVER, "all"]
    return [(key, n, lines, f"{(dn - dp) / lines:.2f}", f"{dn / dp:.3f}x", f"{cad / same:.3f}x", f"{cad / regen:.3f}x")
            for key in order if key in sums for n, lines, dp, dn, cad, same, regen in [sums[key]]]


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, DEFAULT)
    parser.add_argument("--limit", type=int, default=None,
                        help="long-file corpora: a seeded sample of this many cases per length bucket (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    parser.add_argument("--tokenizers", default=",".join(TOKENIZERS), metavar="NAME,...",
                        help=f"which shipped tokenizers ({', '.join(TOKENIZERS)})")


def run(args) -> int:
    from transformers import PreTrainedTokenizerFast

    names = [n.strip() for n in args.tokenizers.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOKENIZERS]
    if unknown:
        raise SystemExit(f"--tokenizers: unknown {', '.join(unknown)} (known: {', '.join(TOKENIZERS)})")
    cases = []
    sizes = []
    for corpus in corpora_from_args(args):
        picked = sample_by_bucket(corpus, args.limit, f"{args.seed}:{corpus.name}") if corpus.bucketed else list(corpus)
        sizes.append(f"{len(picked)} of {len(corpus)} {corpus.name}")
        cases += picked
    docs = [c.before for c in cases]
    bad = [c.id for c in cases if unnumber_lines(number_lines(c.before)) != c.before]
    if bad:
        raise RuntimeError(f"number_lines does not round-trip on {len(bad)} documents: {bad[:5]}")
    data = shared_data_dir() / "tokenizers"
    sections, summary = [], []
    digits = digits_per_line(docs)
    all_lines = [line for d in docs for line in split_lines(d)]
    empty = sum(line in ("\n", "\r\n") for line in all_lines) / len(all_lines)
    for name in names:
        per_line, rows = tokenizer_rows(load_counter(data / TOKENIZERS[name]), docs)
        best = min(rows, key=lambda r: r[1])
        default = next(r for r in rows if r[0] == DEFAULT_RENDERING)
        old = rows[1]
        summary.append((name, f"{per_line:.2f}", f"{old[1]:.2f} ({old[2]:.3f}x)",
                        f"{default[1]:.2f} ({default[2]:.3f}x)", best[0]))
        table = markdown_table(["rendering", "number tokens per line", "numbered / plain document"],
                               [(r, f"{c:.2f}", f"{x:.3f}x") for r, c, x in rows])
        sections.append(f"### {name}\n\nPlain document: {per_line:.2f} tokens per line.\n\n{table}\n")
        print(f"{name}: plain {per_line:.2f}/line, default {default[1]:.2f}/line ({default[2]:.3f}x), "
              f"before {old[1]:.2f}/line ({old[2]:.3f}x)", flush=True)
    qwen = PreTrainedTokenizerFast.from_pretrained(str(data / "qwen2.5"))
    prompts = markdown_table(["length bucket (lines)", "cases", "lines", "number tokens per line",
                              "numbered / plain document", "`build_prompt` / the same, plain document",
                              "`build_prompt` / `regen_prompt`"],
                             prompt_rows(cases, qwen))
    print(prompts)
    summary_table = markdown_table(
        ["tokenizer", "plain tokens per line", "`NNN \\| ` (before): per line (doc ratio)",
         "default `N text`: per line (doc ratio)", "cheapest rendering"], summary)
    body = f"""{__doc__.split(chr(10) + chr(10), 1)[1].strip()}

Documents: {", ".join(sizes)}{f" (a seeded sample of {args.limit} per length bucket, seed {args.seed})"
                               if args.limit is not None else ""}; the library's rendering round-trips exactly on every
one of them (`unnumber_lines(number_lines(d)) == d`).

**Summary** (number tokens per line, and the numbered / plain document ratio). The line numbers have
{digits:.2f} decimal digits per line, and {empty:.1%} of the lines are empty. Where a tokenizer spells numbers digit by
digit, the default costs the digits and one token per empty line: in the plain document a blank line's newline
joins the one before it (`"\\n\\n"` is one token), after its number it cannot.

{summary_table}

**The library's prompts with Qwen2.5** (chat template; instruction = the case's commit subject):

{prompts}

**Per tokenizer and rendering:**

{chr(10).join(sections)}"""
    extra = []
    if args.limit is not None:
        extra += ["--limit", str(args.limit)] + (["--seed", str(args.seed)] if args.seed else [])
    if names != list(TOKENIZERS):
        extra += ["--tokenizers", ",".join(names)]
    name = report_stem(args, "line_numbers", DEFAULT)
    path = write_report(args.out_dir, name, "Line numbers in the Copy-as-Decode prompt", body,
                        shlex.join(["cad-outlines", "study", "line-numbers", *corpus_argv(args), *extra]))
    print(f"wrote {path}")
    return 0
