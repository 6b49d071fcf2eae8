"""Compile profile: a cold compile (empty cache folder) of each grammar x tokenizer, phase by
phase (wall and CPU seconds, each phase's own peak RSS), each pair in a fresh subprocess.

Phases are those of :func:`cad_outlines.engine.compile.compile_grammar` with a
:class:`~cad_outlines.engine.compile_profile.CompileProfile`; the peak of each phase is its own
(the kernel's high-water mark is reset at every phase start). Wall seconds depend on what else
the machine runs; the report gives the load average before and after, and CPU seconds (the
compiling process only: the forked Bar-Hillel helper of the whole-sequences step is not
counted, so that step's CPU is about half its work).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .report import markdown_table, write_report

DESCRIPTION = "cold compile time and peak memory per phase, per grammar x tokenizer (and held-out grammars)"

REPO = Path(__file__).resolve().parent.parent
HELD_OUT = {"python2": ("data:grammars/lark/examples/python2.lark", "single_input"),
            "verilog": ("data:grammars/lark/examples/verilog.lark", None),
            "lark": ("data:grammars/lark/lark.lark", None),
            "python3_outlines": ("data:grammars/outlines/historical/python3.lark", None),
            "sql_select": ("data:grammars/outlines/historical/sql_select.lark", None)}


def add_arguments(parser) -> None:
    from .streamlining import MAIN

    parser.add_argument("--grammars", default=",".join(MAIN), help="of " + ", ".join(MAIN))
    parser.add_argument("--held-out", default=",".join(HELD_OUT),
                        help="grammars no other study compiles with these tokenizers: " + ", ".join(HELD_OUT))
    parser.add_argument("--tokenizers", default="qwen2.5")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def _child(grammar: str, start: str | None, tokenizer_dir: str) -> None:
    """In a fresh process: load the vocabulary, compile cold into an empty cache folder,
    print the profile as JSON."""
    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.compile_profile import CompileProfile, peak_rss_mib
    from cad_outlines.engine.vocabulary import Vocabulary

    vocab = Vocabulary.from_tokenizer(tokenizer_dir)
    before = peak_rss_mib()
    prof = CompileProfile(per_phase_peaks=True)
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        g = compile_grammar(Path(grammar), vocab, start=start, cache=cache, progress=False, profile=prof).load_objects()
        total = time.perf_counter() - t0
    print(json.dumps(dict(profile=prof.to_dict(), wall=total, before_mib=before, configs=len(g.store.configs),
                          rows=g.store.n_rows, held=g.store.n_stored_rows, vocab=vocab.size)))


def _run_one(path: Path, start: str | None, tdir: Path) -> dict:
    code = ("import sys; sys.path.insert(0, %r); import analysis.compile_profile as m; m._child(%r, %r, %r)"
            % (str(REPO), str(path), start, str(tdir)))
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(REPO))
    if out.returncode != 0:
        return dict(error=(out.stderr.strip().splitlines() or ["failed"])[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(args) -> int:
    from .streamlining import MAIN, _data, _path

    data = _data()
    pairs = [(name, *MAIN[name], False) for name in args.grammars.split(",") if name]
    pairs += [(name, *HELD_OUT[name], True) for name in args.held_out.split(",") if name]
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    results = []
    for tok in args.tokenizers.split(","):
        tdir = data / "tokenizers" / tok
        for name, spec, start, held in pairs:
            print(f"compile-profile: {name} x {tok}", file=sys.stderr, flush=True)
            results.append((name, tok, held, _run_one(_path(spec, data), start, tdir)))
    load1 = os.getloadavg()
    summary, sections = [], []
    for name, tok, held, r in results:
        if "error" in r:
            summary.append([name + (" (held out)" if held else ""), tok, "-", "-", "-", "-", "-", r["error"]])
            continue
        p = r["profile"]
        phases = {ph["name"]: ph for ph in p["phases"]}
        stream = sum(ph["seconds"] for n, ph in phases.items() if n.startswith("streamline") or n == "grammar analysis")
        saves = sum(ph["seconds"] for n, ph in phases.items() if n.startswith("save"))
        summary.append([name + (" (held out)" if held else ""), tok, f"{r['configs']:,}", f"{r['rows']:,} / {r['held']:,}",
                        f"{p['seconds'] - saves:.2f}", f"{p['cpu_seconds']:.2f}", f"{stream:.2f}",
                        f"{p['peak_rss_mib']:.0f} ({r['before_mib']:.0f})"])
        rows = [[ph["name"], f"{ph['seconds']:.2f}", f"{ph['cpu_seconds']:.2f}", f"{ph['peak_rss_mib']:.0f}",
                 ph["note"]] for ph in p["phases"]]
        sections.append(f"### {name} x {tok}\n\n" + markdown_table(
            ["phase", "wall s", "CPU s", "own peak RSS MiB", "note"], rows))
    body = [__doc__.split("\n\n", 1)[1].strip(), "",
            f"Load average (1, 5, 15 min) at the start {tuple(round(x, 2) for x in load0)}, at the end "
            f"{tuple(round(x, 2) for x in load1)}; the study took {time.perf_counter() - t0:.0f} s.", "",
            "## Summary", "",
            "'compile s' is the cold compile without the two cache writes (what `compile_grammar(..., cache=False)` "
            "does); peak RSS is the highest phase peak, with the peak before compiling (interpreter, imports, "
            "vocabulary) in brackets. Store rows per config are what masks read; 'held' counts configurations with "
            "equal rows once (how the store is kept).", "",
            markdown_table(["grammar", "tokenizer", "lexer configs", "store rows (streamlined): per config / held", "compile s",
                            "CPU s (all phases)", "analysis + streamlining s", "peak RSS MiB (before)"], summary),
            "", "## Phases", "", "\n\n".join(sections)]
    cmd = "cad-outlines study compile-profile" + (f" --grammars {args.grammars}" if args.grammars else "") + \
          (f" --held-out {args.held_out}" if args.held_out else "") + f" --tokenizers {args.tokenizers}"
    path = write_report(args.out_dir, "compile_profile", "Compile profile: cold compile by phase", "\n".join(body),
                        cmd)
    print(f"wrote {path}")
    return 0
