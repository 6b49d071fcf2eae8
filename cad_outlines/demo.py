"""``cad-outlines demo``: the main job on the embedded examples, with no downloads.

For each example: the document with its line numbers, the oracle edit program, its
resolution (checked against the expected text), the copy ceiling, and the program run
through the real Copy-as-Decode loop on the embedded model (random weights, teacher-forced
through the program): forwards and tokens, against one forward per output token for
rewriting the document. Then a few sampled runs of the untrained model: valid (if
meaningless) programs, some closed at once, some cut off by their token budget.
"""

from __future__ import annotations

from .cli_common import UserError
from .edits import number_lines, oracle_program, resolve
from .edits.metrics import copy_coverage
from .examples import load_examples

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("--example", action="append", help="run only these examples (by name)")
    parser.add_argument("--tokenizer", help="tokenizer.json or a directory holding one, for exact token counts")
    parser.add_argument("--no-model", action="store_true", help="skip the decode-loop runs")


def _token_offsets_fn(path: str | None):
    if not path:
        return None, "a tokenizer-free estimate"
    from pathlib import Path

    from tokenizers import Tokenizer

    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not p.exists():
        raise UserError(f"tokenizer {path!r}: no such file or folder")
    if not file.is_file():
        raise UserError(f"tokenizer {path!r}: no tokenizer.json in that folder (the demo reads a tokenizer.json)")
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as e:  # the tokenizers library raises a bare Exception for a file it cannot read
        raise UserError(f"tokenizer {str(file)!r}: not a tokenizer.json the tokenizers library can read: "
                        f"{' '.join(str(e).split())}") from e
    return (lambda text: tok.encode(text, add_special_tokens=False).offsets), f"the tokenizer {path}"


def _editor():
    import tempfile

    from .examples.toy_model import toy_model_and_tokenizer
    from .generators.copy_decode import CopyEditor

    model, tokenizer = toy_model_and_tokenizer()
    return CopyEditor(model, tokenizer, cache=tempfile.mkdtemp(prefix="cad-demo-"))


def _stats_line(stats) -> str:
    f = stats.forwards
    return (f"{stats.total_forwards} forwards (prompt {f['prompt']}, decode {f['decode']}, copy {f['copy']}, "
            f"fast-forward {f['fast_forward']}); tokens: {stats.generated_tokens} generated, "
            f"{stats.copied_tokens} copied, {stats.fast_forwarded_tokens} fast-forwarded; "
            f"{stats.wall_s * 1000:.0f} ms ({stats.model_s * 1000:.0f} in the model, {stats.mask_s * 1000:.0f} masking)")


SAMPLED_SEEDS = 4


def _program_summary(result) -> str:
    ops = len(result.program.ops)
    if not result.complete:
        return f"cut off ({result.stop_reason}) after {ops} op{'s' * (ops != 1)}"
    if not ops:
        return "an empty program (the model closed it at once): it resolves to an empty document"
    return f"{ops} op{'s' * (ops != 1)}, resolving to {len(result.text)} characters"


def run(args) -> int:
    offsets_fn, how = _token_offsets_fn(args.tokenizer)
    every = load_examples()
    unknown = [name for name in args.example or () if name not in {e.name for e in every}]
    if unknown:
        raise UserError(f"no example named {', '.join(map(repr, unknown))}; the examples are: "
                        f"{', '.join(e.name for e in every)}")
    examples = [e for e in every if not args.example or e.name in args.example]
    editor = None if args.no_model else _editor()
    failures = 0
    for ex in examples:
        program = oracle_program(ex.before, ex.after)
        new_text = resolve(program, ex.before)
        ok = new_text == ex.after
        covered, total = copy_coverage(program, ex.before, offsets_fn(new_text) if offsets_fn else None)
        print(f"=== {ex.name}: {ex.instruction}")
        print("--- document")
        print(number_lines(ex.before), end="")
        print("--- oracle program")
        print(program.to_text())
        print("--- resolved" + ("" if ok else " (MISMATCH)"))
        print(new_text if new_text.endswith("\n") else new_text + "\\ No newline at end of file\n", end="")
        print(f"--- copy ceiling: {covered}/{total} output tokens ({100 * covered / max(total, 1):.1f}%) are copied, by {how}")
        if editor is not None:
            result = editor.execute(ex.before, program.to_text(header=False), ex.instruction)
            ok = ok and result.complete and result.text == ex.after
            rewrite = len(editor.encode(ex.after))
            print(f"--- decode loop (embedded model, teacher-forced through the program): {_stats_line(result.stats)}")
            print(f"    rewriting the document instead: {rewrite} decode forwards")
        failures += not ok
        print()
    if editor is not None:
        from .generators.copy_decode import Sampling

        ex = examples[0]
        print(f"=== sampled runs of the untrained embedded model on {ex.name} (temperature 1, at most 40 sampled "
              "tokens): valid programs, meaningless content")
        for seed in range(SAMPLED_SEEDS):
            result = editor.edit(ex.before, ex.instruction, max_new_tokens=40,
                                 sampling=Sampling(temperature=1.0, seed=seed))
            print(f"--- seed {seed}: {_program_summary(result)}")
            shown = result.program_text if len(result.program_text) <= 90 else result.program_text[:90] + "..."
            print(f"    {shown!r}")
    return 1 if failures else 0
