"""``cad-outlines edit FILE --instruction ... --model DIR``: one Copy-as-Decode edit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def add_arguments(parser) -> None:
    parser.add_argument("file", help="the document to edit (read and written byte for byte: CRLF stays CRLF)")
    parser.add_argument("--instruction", required=True, help="what to change, in words")
    parser.add_argument("--model", required=True, help="a transformers model folder (tokenizer inside unless --tokenizer)")
    parser.add_argument("--tokenizer", help="tokenizer folder, tokenizer.json or tokenizer.model (default: the model folder)")
    parser.add_argument("--max-new-tokens", type=_positive_int, default=512,
                        help="most tokens the model may sample (copies and forced tokens do not count); a run also "
                             "stops when the model's context is full (default: 512)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy; else sampling")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default: 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    parser.add_argument("--copy-mode", choices=["prefill", "skip"], default="prefill",
                        help="prefill (default): a copy's lines enter the model's context in one forward; "
                             "skip: the model sees only the copy tag")
    parser.add_argument("--monotonic", action="store_true", help="copy spans never go backwards")
    parser.add_argument("--speculative", type=_non_negative_int, default=0, metavar="K",
                        help="draft up to K tokens by prompt lookup inside gen bodies, verified in one forward")
    parser.add_argument("--output", help="write the new document here (only if the program completed)")


def _folder(path: str, what: str) -> str:
    from .cli import UserError

    p = Path(path)
    if not p.is_dir():
        raise UserError(f"{what} {path!r}: {'not a folder' if p.exists() else 'no such folder'}")
    if what == "model" and not (p / "config.json").is_file():
        raise UserError(f"model {path!r}: no config.json in it (a transformers model folder has one)")
    return str(p)


def run(args) -> int:
    from transformers import AutoModelForCausalLM

    from .cli import load_tokenizer
    from .generators.copy_decode import CopyEditor, Sampling

    with open(args.file, encoding="utf-8", newline="") as f:  # newline="": keep \r\n as it is
        document = f.read()
    model = AutoModelForCausalLM.from_pretrained(_folder(args.model, "model")).eval()
    tokenizer = load_tokenizer(args.tokenizer or args.model)
    editor = CopyEditor(model, tokenizer, progress=True)
    result = editor.edit(document, args.instruction, max_new_tokens=args.max_new_tokens, copy_mode=args.copy_mode,
                         monotonic=args.monotonic, speculative=args.speculative,
                         sampling=Sampling(temperature=args.temperature, top_p=args.top_p, seed=args.seed))
    s = result.stats
    print("--- program")
    print(result.program_text)
    print("--- diff" + ("" if result.complete else " (incomplete program: only the part it wrote)"))
    sys.stdout.write(result.diff() or "(no change)\n")
    why = {"max_new_tokens": f"--max-new-tokens {args.max_new_tokens} reached",
           "context_length": f"the model's context ({editor.max_positions} positions) is full"}.get(result.stop_reason,
                                                                                               result.stop_reason)
    print(f"--- {'complete' if result.complete else 'INCOMPLETE: ' + why}; {s.total_forwards} forwards "
          f"{s.forwards}; {s.generated_tokens} generated, {s.copied_tokens} copied, {s.fast_forwarded_tokens} "
          f"fast-forwarded tokens"
          + (f", {s.accepted_tokens}/{s.drafted_tokens} drafted tokens kept" if s.drafted_tokens else "")
          + f"; {s.wall_s:.2f}s", file=sys.stderr)
    if args.output:
        if not result.complete:
            print("not writing --output: the program is incomplete", file=sys.stderr)
            return 1
        with open(args.output, "w", encoding="utf-8", newline="") as f:
            f.write(result.text)
    return 0 if result.complete else 1
