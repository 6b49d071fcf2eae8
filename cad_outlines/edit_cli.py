"""``cad-outlines edit FILE --instruction ... --model DIR``: one Copy-as-Decode edit."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("file", help="the document to edit")
    parser.add_argument("--instruction", required=True)
    parser.add_argument("--model", required=True, help="a transformers model folder (tokenizer inside unless --tokenizer)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the model folder)")
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--copy-mode", choices=["prefill", "skip"], default="prefill")
    parser.add_argument("--monotonic", action="store_true", help="copy spans never go backwards")
    parser.add_argument("--speculative", type=int, default=0, metavar="K",
                        help="draft up to K tokens by prompt lookup inside gen bodies, verified in one forward")
    parser.add_argument("--output", help="write the new document here (only if the program completed)")


def run(args) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .generators.copy_decode import CopyEditor, Sampling

    document = Path(args.file).read_text(encoding="utf-8")
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
    editor = CopyEditor(model, tokenizer, progress=True)
    result = editor.edit(document, args.instruction, max_new_tokens=args.max_new_tokens, copy_mode=args.copy_mode,
                         monotonic=args.monotonic, speculative=args.speculative,
                         sampling=Sampling(temperature=args.temperature, top_p=args.top_p, seed=args.seed))
    s = result.stats
    print("--- program")
    print("<program>" + result.program_text)
    print("--- diff")
    print(result.diff() or "(no change)")
    print(f"--- {'complete' if result.complete else 'INCOMPLETE: ' + result.stop_reason}; {s.total_forwards} forwards "
          f"{s.forwards}; {s.generated_tokens} generated, {s.copied_tokens} copied, {s.fast_forwarded_tokens} "
          f"fast-forwarded tokens"
          + (f", {s.accepted_tokens}/{s.drafted_tokens} drafted tokens kept" if s.drafted_tokens else "")
          + f"; {s.wall_s:.2f}s", file=sys.stderr)
    if args.output:
        if not result.complete:
            print("not writing --output: the program is incomplete", file=sys.stderr)
            return 1
        Path(args.output).write_text(result.text, encoding="utf-8")
    return 0 if result.complete else 1
