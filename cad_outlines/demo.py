"""``cad-outlines demo``: the main job on the embedded examples, with no downloads.

For each example: the document with its line numbers, the oracle edit program, its
resolution (checked against the expected text) and the copy ceiling.
"""

from __future__ import annotations

from .edits import number_lines, oracle_program, resolve
from .edits.metrics import copy_coverage
from .examples import load_examples

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("--example", action="append", help="run only these examples (by name)")
    parser.add_argument("--tokenizer", help="tokenizer.json or a directory holding one, for exact token counts")


def _token_offsets_fn(path: str | None):
    if not path:
        return None, "a tokenizer-free estimate"
    from pathlib import Path

    from tokenizers import Tokenizer

    p = Path(path)
    tok = Tokenizer.from_file(str(p / "tokenizer.json" if p.is_dir() else p))
    return (lambda text: tok.encode(text, add_special_tokens=False).offsets), f"the tokenizer {path}"


def run(args) -> int:
    offsets_fn, how = _token_offsets_fn(args.tokenizer)
    examples = [e for e in load_examples() if not args.example or e.name in args.example]
    if not examples:
        raise SystemExit(f"no example named {args.example}")
    failures = 0
    for ex in examples:
        program = oracle_program(ex.before, ex.after)
        new_text = resolve(program, ex.before)
        ok = new_text == ex.after
        failures += not ok
        covered, total = copy_coverage(program, ex.before, offsets_fn(new_text) if offsets_fn else None)
        print(f"=== {ex.name}: {ex.instruction}")
        print("--- document")
        print(number_lines(ex.before), end="")
        print("--- oracle program")
        print(program.to_text())
        print("--- resolved" + ("" if ok else " (MISMATCH)"))
        print(new_text if new_text.endswith("\n") else new_text + "\\ No newline at end of file\n", end="")
        print(f"--- copy ceiling: {covered}/{total} output tokens ({100 * covered / max(total, 1):.1f}%) are copied, by {how}\n")
    return 1 if failures else 0
