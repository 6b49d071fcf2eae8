"""Edit corpora: ours by name, or any JSONL file with named before/after fields.

A field spec is a dotted path into each record (``meta.before``), or several joined
with ``+`` whose values are concatenated (``declaration+buggy_solution``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EditCase", "Corpus", "DATASETS", "shared_data_dir", "load_corpus", "add_corpus_arguments", "corpora_from_args", "corpus_argv"]

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class EditCase:
    id: str
    before: str
    after: str
    instruction: str = ""


@dataclass(frozen=True)
class Corpus:
    name: str
    cases: tuple[EditCase, ...]

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
}
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
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            where = f"{path}:{lineno}"
            instruction = _get(record, instruction_field, where) if instruction_field and instruction_field in record else ""
            cases.append(EditCase(str(record.get(id_field, lineno)), _get(record, before_field, where),
                                  _get(record, after_field, where), instruction))
    return Corpus(name or path.stem, tuple(cases))


def load_corpus(name: str) -> Corpus:
    """One of :data:`DATASETS` by name."""
    key = ALIASES.get(name, name)
    if key not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))} (or pass --jsonl)")
    rel, before, after, instr = DATASETS[key]
    return load_jsonl(shared_data_dir() / rel, before, after, name=key, instruction_field=instr)


def add_corpus_arguments(parser, default: list[str]) -> None:
    parser.add_argument("--dataset", action="append", default=None, metavar="NAME",
                        help=f"a dataset by name (repeatable); default: {' '.join(default)}; known: {', '.join(sorted(DATASETS))}")
    parser.add_argument("--jsonl", action="append", default=[], metavar="FILE", help="any JSONL edit corpus (repeatable)")
    parser.add_argument("--before-field", default="before", help="field spec of the input document (dotted, a+b joins)")
    parser.add_argument("--after-field", default="after", help="field spec of the edited document")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"), help="where the report goes")
    parser.set_defaults(_default_datasets=default)


def corpora_from_args(args) -> list[Corpus]:
    names = args.dataset if args.dataset is not None else ([] if args.jsonl else args._default_datasets)
    corpora = [load_corpus(n) for n in names]
    corpora += [load_jsonl(p, args.before_field, args.after_field) for p in args.jsonl]
    if not corpora:
        raise SystemExit("no corpus given")
    return corpora

def corpus_argv(args) -> list[str]:
    """The corpus options of `args`, as command-line words (for the reproduce line)."""
    words = [w for name in args.dataset or () for w in ("--dataset", name)]
    words += [w for path in args.jsonl for w in ("--jsonl", path)]
    if args.jsonl:
        words += ["--before-field", args.before_field, "--after-field", args.after_field]
    return words
