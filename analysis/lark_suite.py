"""lark's own test suite as a corpus: every (grammar, options, text) lark's tests parse with the LALR parser,
recorded by running those tests, then decided by lark (LALR, basic lexer: the engine's semantics) and by the
engine teacher-forced with GPT-2's and Qwen2.5's tokens and byte by byte, EOS at the end, and likewise
single-character edits of the texts lark accepts (:mod:`analysis.lark_oracle`).

lark's code and the recorded corpus are not part of this repository: the study takes the path to a lark
source tree with its ``tests/`` (``pip download --no-binary :all: --no-deps lark==1.3.1`` gives the sdist,
which has them; or a clone of github.com/lark-parser/lark at the tag), runs its tests under a recorder in
a subprocess (``Lark.__init__`` and ``Lark.parse`` wrapped; only ``parser="lalr"`` recorded), and caches the
corpus on disk keyed by the content hash of that tree (``--cache``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from .lark_oracle import Case, EngineSide, LarkSide, check_case, judge_refusal
from .report import markdown_table, write_report

REPO = Path(__file__).resolve().parent.parent
DESCRIPTION = "lark's own tests: every LALR grammar and text they parse, the engine against lark"

# options of a recorded Lark that the engine's compile_grammar does not take: a case that uses one cannot
# be compiled as lark built it (the report counts them)
UNSUPPORTED_OPTIONS = ("edit_terminals", "lexer_callbacks", "g_regex_flags", "regex", "use_bytes")


# ------------------------------------------------------------------------------------------ recording
RECORDER = r'''
import json, sys, io
import lark
from lark import Lark

out = open(sys.argv[1], "a", encoding="utf-8")
_init, _parse = Lark.__init__, Lark.parse

def _text_of(grammar):
    if isinstance(grammar, str):
        return grammar
    if not hasattr(grammar, "read") or not hasattr(grammar, "seek"):
        return None
    at = grammar.tell()
    text = grammar.read()
    grammar.seek(at)
    return text

def init(self, grammar, **options):
    text = _text_of(grammar)
    _init(self, grammar, **options)
    self._cad_record = None
    if text is None or self.options.parser != "lalr":
        return
    opts = {}
    for k, v in options.items():
        simple = v is None or isinstance(v, (str, int, float, bool)) or (
            isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))
        opts[k] = (list(v) if isinstance(v, tuple) else v) if simple else {"object": type(v).__name__}
    pl = self.options.postlex
    if pl is not None:
        from lark.indenter import Indenter
        if isinstance(pl, Indenter):
            opts["postlex"] = {"indenter": {k: getattr(pl, k) for k in ("NL_type", "OPEN_PAREN_types",
                               "CLOSE_PAREN_types", "INDENT_type", "DEDENT_type", "tab_len")}}
        else:
            opts["postlex"] = {"other": type(pl).__name__}
    if not isinstance(self.options.lexer, str):
        opts["lexer"] = "custom " + getattr(self.options.lexer, "__name__", "lexer")
    if isinstance(getattr(grammar, "name", None), str):
        opts["source_path"] = grammar.name
    self._cad_record = {"grammar": text, "options": opts, "start": list(self.options.start)}

def parse(self, text, start=None, on_error=None):
    rec = getattr(self, "_cad_record", None)
    try:
        result = _parse(self, text, start=start, on_error=on_error)
        verdict = "accept"
        return result
    except lark.exceptions.LarkError as e:
        verdict = "reject: " + type(e).__name__
        raise
    except Exception as e:
        verdict = "error: " + type(e).__name__
        raise
    finally:
        if rec is not None and on_error is None and isinstance(text, str):
            test = __import__("os").environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
            out.write(json.dumps({**rec, "start_used": start or rec["start"][0], "text": text, "verdict": verdict,
                                  "test": test}) + "\n")
            out.flush()

Lark.__init__, Lark.parse = init, parse
import pytest
sys.exit(pytest.main([sys.argv[2], "-q", "-p", "no:cacheprovider"]))
'''


def tree_hash(source: Path) -> str:
    """Content hash of a lark source tree's package and tests (what the corpus depends on)."""
    h = hashlib.sha256()
    for sub in ("lark", "tests"):
        for p in sorted((source / sub).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(source)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:24]


def record(source: Path, cache: Path, progress: bool = True) -> tuple[list[dict], Path, float]:
    """The corpus of `source` (a lark tree with tests/): from the cache, else recorded by running lark's
    tests under the recorder (minutes). Returns (entries, the cache file, seconds spent recording)."""
    if not (source / "tests").is_dir() or not (source / "lark").is_dir():
        raise FileNotFoundError(f"{source} is not a lark source tree with lark/ and tests/ (get one with `pip "
                                "download --no-binary :all: --no-deps lark==1.3.1` and unpack it)")
    path = cache / f"lark-suite-{tree_hash(source)}.jsonl"
    if path.is_file():
        return [json.loads(line) for line in path.open(encoding="utf-8")], path, 0.0
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "corpus.jsonl"
        script = Path(tmp) / "record.py"
        script.write_text(RECORDER, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(source)}
        if progress:
            print(f"recording lark's tests in {source} (a few minutes) ...", file=sys.stderr)
        # check=False: a failing lark test (a missing optional dependency) only records less
        subprocess.run([sys.executable, str(script), str(raw), str(source / "tests")], cwd=source, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600, check=False)
        seen, entries = set(), []
        for line in raw.open(encoding="utf-8") if raw.is_file() else ():
            e = json.loads(line)
            key = json.dumps([e["grammar"], e["options"], e["start_used"], e["text"]], sort_keys=True)
            if key not in seen:
                seen.add(key)
                entries.append(e)
    tmp_path = path.with_suffix(".tmp")
    tmp_path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    os.replace(tmp_path, path)
    return entries, path, time.perf_counter() - t0


# ------------------------------------------------------------------------------------------ checking
def _postlex(options: dict):
    """The recorded postlexer rebuilt (lark's Indenter with the recorded settings), "auto" without one."""
    pl = options.get("postlex")
    if pl is None:
        return "auto"
    if "indenter" not in pl:
        return None
    from lark.indenter import Indenter

    attrs = dict(pl["indenter"])
    return type("RecordedIndenter", (Indenter,), attrs)()


def not_applicable(options: dict) -> str | None:
    """Why a recorded grammar cannot be compiled as lark built it, or None. A custom lexer class or a
    transformer is no reason: the oracle is lark's basic lexer either way, and a transformer does not change
    the language."""
    if isinstance(options.get("postlex"), dict) and "other" in options["postlex"]:
        return "a postlexer other than lark's Indenter"
    used = [k for k in UNSUPPORTED_OPTIONS if options.get(k) not in (None, False, 0, {}, [])]
    return f"lark option {used[0]}" if used else None


def check_grammar(entries: list[dict], tokenizers, rng: random.Random, edits_per_text: int) -> dict:
    """Every text of one recorded (grammar, options, start): lark's verdicts, the engine's, the problems."""
    from .grammar_fuzz import compile_engine
    from .grammar_sampler import edits

    first = entries[0]
    grammar, options, start = first["grammar"], first["options"], first["start_used"]
    res = {"grammar": grammar, "start": start, "texts": 0, "edits": 0, "status": "checked", "problems": [],
           "verdicts": Counter(), "recorded_vs_basic": 0, "lexer_differences": [],
           "tests": sorted({e["test"] for e in entries})}
    why = not_applicable(options)
    if why:
        res["status"] = f"not applicable: {why}"
        return res
    imports = [str(p) for p in (options.get("import_paths") or []) if isinstance(p, str)]
    if isinstance(options.get("source_path"), str):  # a grammar read from a file: %imports relative to it
        imports.append(str(Path(options["source_path"]).parent))
    postlex = _postlex(options)
    try:
        lark_side = LarkSide(grammar, start=start, import_paths=imports, postlex=postlex)
    except Exception as e:  # noqa: BLE001 - lark (basic lexer) refuses what it built with its own options
        res["status"] = f"lark's basic lexer refuses: {type(e).__name__}"
        return res
    engines = {}
    for name in tokenizers.names:
        try:
            compiled = compile_engine(grammar, tokenizers.vocab[name], start=start, import_paths=imports,
                                      postlex=postlex)
        except Exception as e:  # noqa: BLE001 - a refusal, documented or not
            category, problem = judge_refusal(e, grammar, lark_side, start=start, import_paths=imports,
                                              postlex=postlex)
            res["status"] = f"engine refuses: {category}"
            res["refusal"] = f"{type(e).__name__}: {e}"
            if problem:
                res["problems"].append(Case(grammar, "", "refusal", problem, start))
            return res
        engines[name] = EngineSide(compiled, tokenizers.encode[name], tokenizers.byte_ids[name])
    texts = [(e["text"], e["verdict"]) for e in entries]
    extra = []
    for text, recorded in texts:
        if recorded == "accept":
            alphabet = "".join(sorted(set(grammar + text) - {"\n"}))
            extra += [(t, None) for t in edits(text, rng, edits_per_text, alphabet + " \n")]
    for text, recorded in texts + extra:
        for name, engine in engines.items():
            try:
                out = check_case(lark_side, engine, text)
            except Exception as e:  # noqa: BLE001
                res["problems"].append(Case(grammar, text, "crash", f"{name}: {type(e).__name__}: {e}", start))
                continue
            res["verdicts"][out.lark] += 1
            res["problems"] += [Case(grammar, text, p.split(":", 1)[0], f"{name}: {p}", start) for p in out.problems]
        if recorded is not None:
            res["texts"] += 1
            if (recorded == "accept") != (out.lark == "accept"):
                res["recorded_vs_basic"] += 1
                res["lexer_differences"].append((first["options"].get("lexer", "contextual"), text, recorded,
                                                 out.lark))
        else:
            res["edits"] += 1
    return res


def add_arguments(parser) -> None:
    parser.add_argument("--lark-source", required=True,
                        help="a lark source tree with tests/ (the unpacked sdist of lark==1.3.1, or a clone)")
    parser.add_argument("--tokenizers", default="gpt2,qwen2.5")
    parser.add_argument("--edits", type=int, default=2, help="single-character edits of each accepted text")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", default=None, help="folder of the recorded corpus (default: the library's cache)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def run(args) -> int:
    from tqdm.auto import tqdm

    from cad_outlines.engine.compile import cache_dir

    from .grammar_fuzz import Tokenizers

    source = Path(args.lark_source).resolve()
    entries, corpus, rec_s = record(source, Path(args.cache) if args.cache else cache_dir())
    groups: dict[str, list[dict]] = defaultdict(list)
    for e in entries:
        groups[json.dumps([e["grammar"], e["options"], e["start_used"]], sort_keys=True)].append(e)
    tokenizers = Tokenizers(args.tokenizers.split(","))
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    results = []
    for group in tqdm(list(groups.values()), unit="grammar", desc="lark suite", mininterval=1.0):
        results.append(check_grammar(group, tokenizers, rng, args.edits))
    wall = time.perf_counter() - t0
    body, problems = report_body(results, entries, wall, rec_s, corpus, args)
    cmd = shlex.join(["python", "-m", "analysis", "lark-suite", "--lark-source", "LARK-1.3.1-SOURCE",
                      "--tokenizers", args.tokenizers])
    path = write_report(args.out_dir, "lark_suite", "lark's own test suite: the engine against lark", body, cmd)
    print(body.split("\n\n## ")[0])
    print(f"wrote {path}")
    return 0 if not problems else 1


def report_body(results, entries, wall, rec_s, corpus, args) -> tuple[str, list[Case]]:
    import lark

    status = Counter(r["status"] for r in results)
    checked = [r for r in results if r["status"] == "checked"]
    verdicts = sum((r["verdicts"] for r in results), Counter())
    problems = [p for r in results for p in r["problems"]]
    refusals = Counter((r["status"], r.get("refusal", "")[:160]) for r in results if r["status"] != "checked")
    rows = [["recorded (grammar, options, text) from lark's tests, LALR only", f"{len(entries):,}"],
            ["distinct (grammar, options, start)", f"{len(results):,}"],
            ["checked: lark's basic lexer builds them and the engine compiles them", f"{len(checked):,}"],
            ["texts checked (recorded)", f"{sum(r['texts'] for r in checked):,}"],
            ["single-character edits of accepted texts", f"{sum(r['edits'] for r in checked):,}"],
            ["decisions (text x tokenizer, each BPE and byte by byte)", ", ".join(
                f"lark {k} {v:,}" for k, v in verdicts.most_common())],
            ["texts where lark's recorded verdict (its own lexer option) differs from the basic lexer's",
             f"{sum(r['recorded_vs_basic'] for r in checked):,}"],
            ["disagreements", f"{len(problems):,}"],
            ["time", f"recording {rec_s / 60:.1f} min (0: cached), checking {wall / 60:.1f} min"]]
    body = (
        f"lark {lark.__version__}'s tests (`{Path(args.lark_source).name}`, content hash in the corpus file name "
        f"`{corpus.name}`) run under a recorder: every `Lark.parse` of a parser built with `parser=\"lalr\"` "
        "(whatever its lexer option) gave a (grammar, options, start, text, lark's verdict). Each distinct "
        "grammar is then built by lark with `lexer=\"basic\"` (the engine's semantics, docs/engine_semantics.md; "
        "an Indenter postlexer rebuilt from the recorded settings) and compiled by the engine (lazily, with the "
        "same start, import paths and postlexer); each text, and "
        f"{args.edits} single-character edits of each text lark accepted, is decided by lark and by the engine "
        f"teacher-forced with {args.tokenizers.replace(',', ' and ')} tokens and byte by byte, EOS at the end. "
        "LARK-1.3.1-SOURCE in the command is lark's unpacked sdist (`pip download --no-binary :all: --no-deps "
        "lark==1.3.1`: it has `tests/`); only its `tests/` are run, not `examples/`, and only LALR parsers are recorded: the grammar that "
        "loops (`start: (a+)*` with `!a.1: \"A\" |`, test_resolve_ambiguity_with_shared_node) is among lark's "
        "Earley tests, so it is tests/engine/frontend/test_parser_loops.py's and the fuzzer's, not this "
        "study's.\n\n"
        + markdown_table(["", ""], rows)
        + "\n\n## Grammars not checked\n\n"
        + markdown_table(["status", "grammars"], [[k, v] for k, v in status.most_common() if k != "checked"])
        + "\n\n### The engine's refusals\n\n"
        + markdown_table(["status", "error", "grammars"],
                         [[k[0], f"`{k[1]}`", v] for k, v in refusals.most_common() if k[0].startswith("engine")])
        + "\n\n## Where lark's own lexer option decides otherwise than its basic lexer\n\n"
        + "The engine follows the basic lexer (docs/engine_semantics.md); these are lark's own differences, "
        "listed for the record.\n\n"
        + (markdown_table(["tests", "lexer", "text", "recorded verdict", "basic lexer"],
                          [[", ".join(r["tests"][:2]), lexer, f"`{text!r}`", rec, basic] for r in checked
                           for lexer, text, rec, basic in r["lexer_differences"]][:20]) if any(
            r["lexer_differences"] for r in checked) else "None.")
        + "\n\n## Disagreements\n\n"
        + ("\n\n".join(f"- {p.kind}: {p.detail}\n\n```\n{p.grammar}\n```\n\ntext: `{p.text!r}`"
                       for p in problems[:40]) if problems else "None.")
    )
    return body, problems
