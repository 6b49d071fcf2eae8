"""``cad-outlines edit FILE --instruction ... --model DIR [--format F]``: one edit, Copy-as-Decode or
another edit format under its grammar and the document constraint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .cli_common import UserError, load_tokenizer, non_negative_int, positive_int, temperature, top_p
from .edits.documents import read_document, write_document
from .edits.formats import EDIT_FORMATS
from .engine.vocabulary import model_mismatch

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("file", help="the document to edit: read byte for byte (CRLF stays CRLF); never changed "
                                     "unless --in-place")
    parser.add_argument("--instruction", required=True, help="what to change, in words")
    parser.add_argument("--model", required=True, help="a transformers model folder (tokenizer inside unless --tokenizer)")
    parser.add_argument("--tokenizer", help="tokenizer folder, tokenizer.json or tokenizer.model (default: the model folder)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=512,
                        help="most tokens the model may sample (copies and forced tokens do not count); a run also "
                             "stops when the model's context is full (default: 512)")
    parser.add_argument("--temperature", type=temperature, default=0.0,
                        help="0 (default): greedy; else sampling at this temperature (a finite number > 0)")
    parser.add_argument("--top-p", type=top_p, default=1.0,
                        help="nucleus sampling: the probability mass kept, in (0, 1] (default: 1.0)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="sampling seed, >= 0 (default: 0)")
    parser.add_argument("--format", choices=list(EDIT_FORMATS), default="copy",
                        help="the edit format the model writes: copy (default: Copy-as-Decode over the numbered "
                             "document), search_replace (aider's SEARCH/REPLACE blocks), udiff (unified-diff hunks "
                             "without line numbers), apply_patch (OpenAI's V4A patch), str_replace (Anthropic's "
                             "str_replace calls as JSON); every one constrained so that the edit applies "
                             "(docs/edit_formats.md)")
    parser.add_argument("--copy-mode", choices=["prefill", "skip"], default="prefill",
                        help="prefill (default): a copy's lines enter the model's context in one forward; "
                             "skip: the model sees only the copy tag")
    parser.add_argument("--monotonic", action="store_true", help="copy spans never go backwards")
    parser.add_argument("--speculative", type=non_negative_int, default=0, metavar="K",
                        help="draft up to K tokens by prompt lookup inside gen bodies, verified in one forward")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--output", help="write the new document to this file (only if the program completed)")
    where.add_argument("--in-place", action="store_true",
                       help="write the new document back to FILE (only if the program completed)")
    parser.add_argument("--allow-delete-all", action="store_true",
                        help="let --output / --in-place write an edit that deletes every line of the document "
                             "(refused otherwise: an empty program is more often a model gone wrong)")
    parser.epilog = ("The program, its diff and its cost are printed; FILE is only read unless --in-place, and "
                     "only --output or --in-place writes a file (nothing when the program was cut off: exit "
                     "status 1).")


def _folder(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_dir():
        raise UserError(f"{what} {path!r}: {'not a folder' if p.exists() else 'no such folder'}")
    if what == "model" and not (p / "config.json").is_file():
        raise UserError(f"model {path!r}: no config.json in it (a transformers model folder has one)")
    return str(p)


def _check_sizes(model_dir: str, tokenizer, tokenizer_path: str) -> None:
    """A tokenizer that does not belong to the model (more tokens than its embedding, far fewer, or without
    its EOS id): say so before loading the model. Under another model's tokenizer the model still writes a
    grammatical program, of the wrong tokens (``<program></program>`` deletes the whole document)."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"model {model_dir!r}: config.json cannot be read: {e}") from e
    text = config.get("text_config", {})
    size = config.get("vocab_size") or text.get("vocab_size")
    eos = config.get("eos_token_id", text.get("eos_token_id"))
    why = model_mismatch(len(tokenizer), size if isinstance(size, int) else None, eos)
    if why:
        raise UserError(f"tokenizer {tokenizer_path!r} does not belong to model {model_dir!r}: {why} (config.json); "
                        "give the model's own tokenizer with --tokenizer (or leave it out when the model folder "
                        "holds one)")


def run(args) -> int:
    from transformers import AutoModelForCausalLM

    from .generators.copy_decode import CopyEditor, Sampling

    if args.speculative and args.format != "copy":
        raise UserError(f"--speculative drafts go in the copy format's gen bodies, not with --format {args.format}")
    document = read_document(args.file)  # \r\n kept; a file that is not UTF-8 is named
    model_dir = _folder(args.model, "model")
    tokenizer = load_tokenizer(args.tokenizer or args.model)
    _check_sizes(model_dir, tokenizer, args.tokenizer or args.model)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    editor = CopyEditor(model, tokenizer, progress=None, format=args.format)  # a bar only on a terminal
    result = editor.edit(document, args.instruction, max_new_tokens=args.max_new_tokens, copy_mode=args.copy_mode,
                         name=Path(args.file).name,
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
    target = args.file if args.in_place else args.output
    if target:
        if not result.complete:
            print(f"not writing {'--in-place' if args.in_place else '--output'}: the program is incomplete",
                  file=sys.stderr)
            return 1
        write_document(target, document, result.text, allow_delete_all=args.allow_delete_all,
                       flag="--allow-delete-all")
        print(f"wrote {target}", file=sys.stderr)
    return 0 if result.complete else 1
