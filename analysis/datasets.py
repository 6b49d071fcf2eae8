"""Edit corpora: ours by name, or any JSONL file (``.gz`` too) with named before/after fields.

A field spec is a dotted path into each record (``meta.before``), or several joined
with ``+`` whose values are concatenated (``declaration+buggy_solution``).

``commits`` is the long-file workload: real single-file edits from the git history of
pallets/click and psf/requests (300 each; whole file before and after, the commit subject as
instruction). Its studies sample it per document-length bucket (:data:`LENGTH_BUCKETS`,
:func:`sample_by_bucket`) and report per bucket.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EditCase", "Corpus", "DATASETS", "GROUPS", "LENGTH_BUCKETS", "shared_data_dir", "load_corpus", "load_jsonl",
           "add_corpus_arguments", "corpora_from_args", "corpus_argv", "length_bucket", "sample_by_bucket",
           "changed_fraction"]

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class EditCase:
    id: str
    before: str
    after: str
    instruction: str = ""

    @property
    def lines_before(self) -> int:
        """Lines of the input document (as the edit language counts them)."""
        return _count_lines(self.before)


def _count_lines(text: str) -> int:
    return text.count("\n") + (bool(text) and not text.endswith("\n"))


def changed_fraction(case: EditCase) -> float:
    """Share of the input document's lines that the edit deletes or replaces (plus inserted
    lines), from a line diff, over the input's line count: 0 for no change."""
    import difflib

    a, b = case.before.splitlines(), case.after.splitlines()
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in
                  difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if tag != "equal")
    return changed / max(len(a), 1)


# Document-length buckets (lines before): label -> [lo, hi)
LENGTH_BUCKETS: dict[str, tuple[int, int]] = {"<200": (0, 200), "200-500": (200, 500), "500-1,500": (500, 1501)}
OVER = ">1,500"


def parse_buckets(text: str | None) -> list[str] | None:
    """``--buckets``: comma-separated :data:`LENGTH_BUCKETS` labels (or :data:`OVER`) -> the labels;
    None for none given. The thousands comma of ``500-1,500`` may be written or left out (labels
    are matched from the left, so ``200-500,500-1,500`` is two); an unknown label raises
    SystemExit naming it and the known ones."""
    if not text:
        return None
    labels = [*LENGTH_BUCKETS, OVER]
    spellings = sorted(((v, label) for label in labels for v in {label, label.replace(",", "")}),
                       key=lambda x: -len(x[0]))
    out, rest = [], text.replace(" ", "")
    while rest:
        for spelling, label in spellings:
            if rest.startswith(spelling) and rest[len(spelling):len(spelling) + 1] in ("", ","):
                out.append(label)
                rest = rest[len(spelling) + 1:]
                break
        else:
            raise SystemExit(f"--buckets: unknown bucket {rest.split(',')[0]!r} (known: {', '.join(labels)})")
    return out


def length_bucket(lines: int) -> str:
    """The :data:`LENGTH_BUCKETS` label of a document of `lines` lines (``>1,500`` past the last)."""
    for label, (lo, hi) in LENGTH_BUCKETS.items():
        if lo <= lines < hi:
            return label
    return OVER


def sample_by_bucket(cases, per_bucket: int | None, seed: int | str, buckets: list[str] | None = None) -> list[EditCase]:
    """A seeded sample of `per_bucket` cases from each document-length bucket (all of a
    bucket with fewer, all cases with None), only `buckets` if given; in input order."""
    cases = list(cases)
    chosen: set[int] = set()
    for label in list(LENGTH_BUCKETS) + [OVER]:
        if buckets is not None and label not in buckets:
            continue
        idx = [i for i, c in enumerate(cases) if length_bucket(c.lines_before) == label]
        if per_bucket is not None and per_bucket < len(idx):
            idx = random.Random(f"{seed}:{label}").sample(idx, per_bucket)
        chosen.update(idx)
    return [c for i, c in enumerate(cases) if i in chosen]


@dataclass(frozen=True)
class Corpus:
    name: str
    cases: tuple[EditCase, ...]
    bucketed: bool = False  # long documents: studies sample and report per length bucket

    def __iter__(self) -> Iterator[EditCase]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)


def shared_data_dir() -> Path:
    """``$CAD_OUTLINES_DATA`` or ``../shared/data`` beside the repository."""
    env = os.environ.get("CAD_OUTLINES_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"shared data not found at {path}: set CAD_OUTLINES_DATA")
    return path


_HEP = "edits/humanevalpack/{}/humanevalpack.jsonl"
# name -> (relative path, before field, after field, instruction field)
DATASETS: dict[str, tuple[str, str, str, str]] = {
    **{
        f"humanevalfix-{lang}": (_HEP.format(lang), "declaration+buggy_solution", "declaration+canonical_solution", "instruction")
        for lang in ("python", "js", "cpp", "go", "java", "rust")
    },
    "editeval": ("edits/editeval/edit_eval.jsonl", "input", "output", "instruction"),
    **{f"commits-{repo}": (f"edits/commits/{repo}.jsonl.gz", "before", "after", "instruction")
       for repo in ("click", "requests")},
}
# name -> the DATASETS it joins (one corpus, cases in this order); bucketed by document length in the studies
GROUPS: dict[str, tuple[str, ...]] = {"commits": ("commits-click", "commits-requests")}
BUCKETED = {"commits", "commits-click", "commits-requests"}
ALIASES = {"humanevalfix-py": "humanevalfix-python", "hefix-py": "humanevalfix-python", "hefix-js": "humanevalfix-js"}


def _get(record: dict, spec: str, where: str) -> str:
    parts = []
    for path in spec.split("+"):
        value: object = record
        for key in path.split("."):
            if not isinstance(value, dict) or key not in value:
                raise KeyError(f"{where}: field {path!r} not found (keys: {sorted(record)[:12]})")
            value = value[key]
        if not isinstance(value, str):
            raise TypeError(f"{where}: field {path!r} is {type(value).__name__}, not a string")
        parts.append(value)
    return "".join(parts)


def load_jsonl(path: str | Path, before_field: str, after_field: str, *, name: str | None = None,
               instruction_field: str | None = None, id_field: str = "task_id") -> Corpus:
    path = Path(path)
    cases = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            where = f"{path}:{lineno}"
            instruction = _get(record, instruction_field, where) if instruction_field and instruction_field in record else ""
            cases.append(EditCase(str(record.get(id_field, record.get("id", lineno))), _get(record, before_field, where),
                                  _get(record, after_field, where), instruction))
    return Corpus(name or path.name.removesuffix(".gz").removesuffix(".jsonl"), tuple(cases))


def load_corpus(name: str) -> Corpus:
    """One of :data:`DATASETS` by name."""
    key = ALIASES.get(name, name)
    if key in GROUPS:
        parts = [load_corpus(part) for part in GROUPS[key]]
        return Corpus(key, tuple(c for part in parts for c in part), bucketed=key in BUCKETED)
    if key not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(known_names())} (or pass --jsonl)")
    rel, before, after, instr = DATASETS[key]
    corpus = load_jsonl(shared_data_dir() / rel, before, after, name=key, instruction_field=instr)
    return Corpus(corpus.name, corpus.cases, bucketed=key in BUCKETED)


def known_names() -> list[str]:
    return sorted([*DATASETS, *GROUPS])


def add_corpus_arguments(parser, default: list[str]) -> None:
    parser.add_argument("--dataset", action="append", default=None, metavar="NAME",
                        help=f"a dataset by name (repeatable); default: {' '.join(default)}; known: {', '.join(known_names())}")
    parser.add_argument("--jsonl", action="append", default=[], metavar="FILE", help="any JSONL edit corpus (repeatable)")
    parser.add_argument("--before-field", default="before", help="field spec of the input document (dotted, a+b joins)")
    parser.add_argument("--after-field", default="after", help="field spec of the edited document")
    parser.add_argument("--instruction-field", default="instruction",
                        help="field of the instruction (records without it get an empty one)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"), help="where the report goes")
    parser.set_defaults(_default_datasets=default)


def corpora_from_args(args, default: list[str] | None = None) -> list[Corpus]:
    """The corpora of `args` (--dataset names, --jsonl files); without either, `default` (else the
    parser's default datasets)."""
    default = default if default is not None else args._default_datasets
    names = args.dataset if args.dataset is not None else ([] if args.jsonl else default)
    corpora = [load_corpus(n) for n in names]
    corpora += [load_jsonl(p, args.before_field, args.after_field, instruction_field=args.instruction_field)
                for p in args.jsonl]
    if not corpora:
        raise SystemExit("no corpus given")
    return corpora

def corpus_argv(args) -> list[str]:
    """The corpus options of `args`, as command-line words (for the reproduce line)."""
    words = [w for name in args.dataset or () for w in ("--dataset", name)]
    words += [w for path in args.jsonl for w in ("--jsonl", path)]
    if args.jsonl:
        words += ["--before-field", args.before_field, "--after-field", args.after_field]
        if args.instruction_field != "instruction":
            words += ["--instruction-field", args.instruction_field]
    return words


def report_stem(args, base: str, default: list[str]) -> str:
    """A study's report file stem: `base` for its default corpora (or --jsonl files), and
    ``base_NAME_...`` for --dataset names that are not the default, so a long-file run
    (``coverage --dataset commits``: ``coverage_commits``) sits beside the default report
    instead of replacing it."""
    names = list(args.dataset or ())
    if not names or args.jsonl or names == list(default):
        return base
    return base + "_" + "_".join(name.replace("-", "_") for name in names)
