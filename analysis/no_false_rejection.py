"""No false rejections (the streamlining blog's experiment 1): teacher-force real Python through the
engine; every true next token must be allowed, and EOS at the end of every file."""

from __future__ import annotations

import os
import shlex
import sysconfig
import time
from pathlib import Path

import numpy as np

from .datasets import shared_data_dir
from .report import markdown_table, write_report

DESCRIPTION = "teacher-force stdlib Python (lark's python.lark); count tokens the mask wrongly rejects"


def add_arguments(parser) -> None:
    parser.add_argument("--tokenizer", default="qwen2.5", help="a folder name in ../shared/data/tokenizers or a path")
    parser.add_argument("--grammar", default=None, help="Lark grammar (default: lark's python.lark)")
    parser.add_argument("--start", default="file_input")
    parser.add_argument("--files", default=None, help="folder of .py files (default: this interpreter's stdlib)")
    parser.add_argument("--max-tokens", type=int, default=1_000_000)
    parser.add_argument("--mask-every", type=int, default=1, help="compute the full mask every k tokens (1 = all)")
    parser.add_argument("--cache", default=None, help="mask-store cache folder (default: the library's)")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent.parent / "docs" / "results"))
    parser.add_argument("--name", default="no_false_rejection")


def tokenizer_dir(spec: str) -> Path:
    path = Path(spec)
    return path if path.exists() else shared_data_dir() / "tokenizers" / spec


def python_files(folder: str | None) -> list[Path]:
    root = Path(folder) if folder else Path(sysconfig.get_paths()["stdlib"])
    skip = ("site-packages", "test", "tests", "idle_test", "lib2to3")
    return sorted(p for p in root.rglob("*.py") if not any(part in skip for part in p.relative_to(root).parts))


def run(args) -> int:
    import lark
    from lark.indenter import PythonIndenter
    from tokenizers import Tokenizer
    from tqdm.auto import tqdm

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.matcher import InvalidTokenError, Matcher
    from cad_outlines.engine.vocabulary import Vocabulary

    grammar = Path(args.grammar) if args.grammar else shared_data_dir() / "grammars/lark/python.lark"
    tdir = tokenizer_dir(args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tdir)
    tok = Tokenizer.from_file(str(tdir / "tokenizer.json"))
    t0 = time.perf_counter()
    compiled = compile_grammar(grammar, vocab, start=args.start, cache=args.cache or True)
    load_s = time.perf_counter() - t0
    checker = lark.Lark(grammar.read_text(), parser="lalr", lexer="basic", postlex=PythonIndenter(),
                        start=args.start, import_paths=[str(grammar.parent)])
    eos = vocab.eos_token_ids[0]
    stats = dict(files=0, skipped_lark=0, skipped_utf8=0, tokens=0, masks=0, rejected=0, eos_missing=0)
    rejections: list[str] = []
    mask_us: list[float] = []
    cpu_us: list[float] = []  # the same masks in this thread's CPU time (preemption by other processes excluded)
    words = np.zeros((compiled.vocab_size + 31) // 32, dtype=np.int32)
    load_before = os.getloadavg()
    bar = tqdm(total=args.max_tokens, unit="tok", desc="teacher-forcing", mininterval=1.0)
    last_report = time.perf_counter()

    def report(final: bool):
        q = np.percentile(mask_us, [50, 99]) if mask_us else [0, 0]
        c = np.percentile(cpu_us, [50, 99]) if cpu_us else [0, 0]
        rows = [[stats["files"], stats["tokens"], stats["masks"], stats["rejected"], stats["eos_missing"],
                 stats["skipped_lark"], stats["skipped_utf8"], f"{np.mean(mask_us) if mask_us else 0:.1f}",
                 f"{q[0]:.1f}", f"{q[1]:.1f}", f"{max(mask_us) if mask_us else 0:.0f}",
                 f"{np.mean(cpu_us) if cpu_us else 0:.1f} / {c[0]:.1f} / {c[1]:.1f} / {max(cpu_us) if cpu_us else 0:.0f}"]]
        table = markdown_table(["files", "tokens", "masks checked", "rejected tokens", "EOS not allowed",
                                "files lark rejects (skipped)", "not UTF-8 (skipped)", "mask mean us", "p50", "p99",
                                "max", "thread CPU mean / p50 / p99 / max us"], rows)
        status = "" if final else (f"**Partial: this run was still going when this was written "
                                   f"({stats['tokens']:,} of {args.max_tokens:,} tokens).**\n\n")
        n_rows = compiled.flat.meta["n_rows"]
        store = (f"the streamlined mask store ({n_rows:,} rows), native core" if compiled.streamlined
                 else f"the unstreamlined mask store ({n_rows:,} rows), native core")
        body = (status + f"Masks from {store}. "
                f"Grammar `{grammar.name}` (start `{args.start}`, lark basic lexer + PythonIndenter), "
                f"tokenizer `{tdir.name}`, files: {'stdlib' if not args.files else args.files} (tests and "
                f"site-packages excluded), only files lark itself parses. Each file is tokenized as one text and fed "
                f"token by token; at every {args.mask_every}th token the full mask is computed and must contain the "
                f"true next token; EOS must be allowed after the last token. Store load/build: {load_s:.1f}s.\n\n"
                f"Mask time: `fill_next_token_bitmask` (packed int32 words, the form a serving loop uses), wall "
                f"clock, and the same calls in this thread's CPU time (time the process was preempted by others "
                f"excluded); load average {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} now "
                f"(2 cores).\n\n"
                + table + ("\n\nRejections:\n" + "\n".join(rejections[:50]) if rejections else "\n\nNo rejections."))
        cmd = shlex.join(["cad-outlines", "study", "no-false-rejection", "--tokenizer", args.tokenizer,
                          "--max-tokens", str(args.max_tokens), "--mask-every", str(args.mask_every)])
        path = write_report(args.out_dir, args.name, "No false rejections (teacher-forced Python)", body, cmd)
        return table, path

    for path in python_files(args.files):
        if time.perf_counter() - last_report > 120:
            report(final=False)
            last_report = time.perf_counter()
        if stats["tokens"] >= args.max_tokens:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            stats["skipped_utf8"] += 1
            continue
        try:
            checker.parse(text)
        except lark.exceptions.LarkError:
            stats["skipped_lark"] += 1
            continue
        ids = tok.encode(text, add_special_tokens=False).ids
        matcher = Matcher(compiled)
        ok = True
        for k, t in enumerate(ids):
            if k % args.mask_every == 0:
                c0 = time.thread_time_ns()
                started = time.perf_counter_ns()
                matcher.fill_next_token_bitmask(words)
                mask_us.append((time.perf_counter_ns() - started) / 1e3)
                cpu_us.append((time.thread_time_ns() - c0) / 1e3)
                stats["masks"] += 1
                allowed = bool((int(words[t >> 5]) >> (t & 31)) & 1)
            else:
                allowed = matcher.validate([t]) == 1
            try:
                if not allowed:
                    raise InvalidTokenError("masked")
                matcher.advance(t)
            except InvalidTokenError:
                stats["rejected"] += 1
                context = tok.decode(ids[max(0, k - 12) : k])
                rejections.append(f"- {path.name} token {k}: after {context[-60:]!r} the mask rejects "
                                  f"{vocab.token_bytes[t]!r}")
                ok = False
                break
        stats["tokens"] += k + 1 if ids else 0
        bar.update(k + 1 if ids else 0)
        if ok:
            stats["files"] += 1
            if not matcher.allowed_mask()[eos]:
                stats["eos_missing"] += 1
                rejections.append(f"- {path.name}: EOS not allowed at the end")
    bar.close()
    table, path = report(final=True)
    print(table)
    print(f"wrote {path}")
    return 0 if not rejections else 1
