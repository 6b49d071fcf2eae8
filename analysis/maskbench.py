"""JSON Schema engines side by side on MaskBench and JSONSchemaBench: coverage, compile time and time to
first mask, mask time, and correctness on MaskBench's labelled instances.

The corpora are guidance-ai/jsonschemabench (public; not shipped here): clone it and pass its folder
(``--jsb PATH``); MaskBench is its ``maskbench/data`` (schemas with valid and invalid instances, labelled
with ``jsonschema`` and its format checkers), JSONSchemaBench its ``data/<category>/`` (schemas only).

Each engine runs in a worker process of its own, one schema at a time, with a wall-clock limit per schema
(``--timeout``): a schema that runs past it is a time-out, the worker is restarted, and the study goes on.
Each worker first compiles, masks and forces one small schema of its own (a warm server: imports and
vocabulary tables are built before the corpus). Per schema a worker compiles it and fills the first mask
of the matcher the compile made (time to first mask, TTFM: one compile and one mask for every engine;
ours with its in-process schema memo cleared, so every schema is new; what the previous schema left is
freed and collected before the clock starts, for every engine; wall clock, and the worker's CPU time,
which a loaded machine does not inflate: there a job of more than a scheduler slice waits for other
processes' slices, a shorter one mostly does not), then teacher-forces
each instance (``json.dumps(data, ensure_ascii=False)``, MaskBench's own spelling) token by token: a mask
before every token (timed), the token must be allowed, and at the end the text must be complete (EOS
allowed). An instance labelled valid and refused is a false rejection; one labelled invalid and accepted
a false admission. Results are cached on disk per (engine, its version, tokenizer, schema file).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import random
import select
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from .report import markdown_table, write_report

DESCRIPTION = "JSON Schema engines on MaskBench / JSONSchemaBench: coverage, TTFM, mask time, correctness"
REPO = Path(__file__).resolve().parent.parent
ENGINES = ("ours", "llguidance", "xgrammar", "outlines-core")
METHOD = "4"  # bump when what a worker measures changes (cached results of an older method are not reused)


def add_arguments(parser) -> None:
    parser.add_argument("--jsb", required=True, help="a clone of github.com/guidance-ai/jsonschemabench")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--tokenizers", default="qwen2.5,llama3", help="folders under the shared data's tokenizers/")
    parser.add_argument("--engines-for", default="",
                        help="engines for some tokenizers only, e.g. 'llama3:ours,llguidance' (';' between tokenizers; "
                             "default: every engine for every tokenizer)")
    parser.add_argument("--maskbench-per-category", type=int, default=0,
                        help="MaskBench schemas per category (0: all)")
    parser.add_argument("--jsb-per-category", type=int, default=30,
                        help="JSONSchemaBench schemas per category (0: all; they have no instances)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per schema and engine")
    parser.add_argument("--whitespace", default="flexible", help="ours: whitespace mode (llguidance's is flexible)")
    parser.add_argument("--property-order", default="any", choices=["any", "declared"],
                        help="ours: property order (MaskBench's valid instances keep their generated key order where "
                             "llguidance refuses the schema; llguidance's is declared)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fresh", action="store_true",
                        help="compute every result in this run (peers side by side under the same load); the cache "
                             "is still written")
    parser.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "cad_outlines" / "maskbench"))
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


# ---------------------------------------------------------------------------------------------------------
# the worker: one engine, schemas from stdin, results to stdout


class _Peer:
    """One engine's compile / first mask / teacher-forcing over token ids."""

    def __init__(self, name: str, tokdir: Path, whitespace: str, property_order: str):
        from tokenizers import Tokenizer

        self.name = name
        self.tok = Tokenizer.from_file(str(tokdir / "tokenizer.json"))
        self.whitespace = whitespace
        self.property_order = property_order
        if name == "ours":
            from cad_outlines.engine.vocabulary import Vocabulary

            self.vocab = Vocabulary.from_tokenizer(tokdir)
        else:
            from transformers import PreTrainedTokenizerFast

            hf = PreTrainedTokenizerFast.from_pretrained(str(tokdir))
            if name == "llguidance":
                import llguidance.hf

                self.llg = llguidance.hf.from_tokenizer(hf)
            elif name == "xgrammar":
                import xgrammar as xg

                self.info = xg.TokenizerInfo.from_huggingface(hf, vocab_size=len(hf))
            else:
                from outlines_core import Vocabulary

                vocab: dict[str, list[int]] = {}
                eos = hf.eos_token_id
                for token, i in hf.get_vocab().items():
                    if i == eos:
                        continue
                    s = hf.convert_tokens_to_string([token])
                    if token.startswith("\u2581") or token == "<0x20>":
                        s = " " + s
                    vocab.setdefault(s, []).append(i)
                self.oc_vocab = Vocabulary(eos, vocab)
                self.n_vocab = len(hf)

    def compile(self, schema) -> tuple[object, object]:
        """Compile: (the first matcher, a factory of fresh ones; each with fill/advance/accepting). The
        first matcher is what the compile made, so time to first mask is one compile and one mask for
        every engine (llguidance compiles in its matcher's constructor)."""
        if self.name == "ours":
            from analysis.engine_bench import Ours
            from cad_outlines.engine import compile as compile_mod
            from cad_outlines.engine.compile_profile import CompileProfile

            self.profile = CompileProfile(memory=False)
            g = compile_mod.compile_json_schema(schema, self.vocab, cache=False, whitespace=self.whitespace,
                                                property_order=self.property_order, profile=self.profile)
            return Ours(g), lambda: Ours(g)
        if self.name == "llguidance":
            import llguidance

            from analysis.engine_bench import LLG

            grammar = json.dumps({"grammars": [{"json_schema": schema}]})
            first = LLG(self.llg, grammar)
            if first.m.is_error():
                raise ValueError(first.m.get_error())
            return first, lambda: LLG(self.llg, grammar)
        if self.name == "xgrammar":
            import xgrammar as xg

            from analysis.engine_bench import XGR

            compiled = xg.GrammarCompiler(self.info, cache_enabled=False).compile_json_schema(
                json.dumps(schema), any_whitespace=True, strict_mode=False)
            return XGR(compiled, self.info), lambda: XGR(compiled, self.info)
        from outlines_core import Guide, Index
        from outlines_core.json_schema import build_regex_from_schema

        index = Index(build_regex_from_schema(json.dumps(schema)), self.oc_vocab)
        return _OC(Guide(index), self.n_vocab), lambda: _OC(Guide(index), self.n_vocab)

    def forget(self) -> None:
        """Before a schema is timed: what the previous one left is freed (the harness's garbage, not
        the new compile's work), and ours forgets the schemas it compiled (a schema seen before,
        as MaskBench and JSONSchemaBench share some, is new)."""
        if self.name == "ours":
            from cad_outlines.engine import compile as compile_mod

            compile_mod._SCHEMAS.clear()
        gc.collect()

    def warm_up(self) -> None:
        """One small schema of our own, compiled, masked and forced before the corpus: what a server
        has done before a new schema arrives (imports, vocabulary tables), so the first corpus schema
        is timed as any other."""
        m, make = self.compile(_WARM_UP)
        m.fill()
        for t in self.tok.encode(json.dumps({"name": "x", "n": 1}), add_special_tokens=False).ids:
            m.advance(t)
            m.fill()

    def run(self, path: str) -> dict:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        schema = d.get("schema", d)
        out: dict = {"file": path}
        self.forget()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            m, make = self.compile(schema)
            t1 = time.perf_counter()
            m.fill()
            t2, c2 = time.perf_counter(), time.process_time()
        except Exception as e:  # noqa: BLE001 - an engine's refusal, in its own words
            out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            return out
        out.update(compile_ms=1000 * (t1 - t0), ttfm_ms=1000 * (t2 - t0), ttfm_cpu_ms=1000 * (c2 - c0), masks_us=[],
                   tests=[])
        if self.name == "ours":  # where the time to first mask goes: the compile's phases, then the first fill
            phases: dict[str, float] = {}
            for p in self.profile.phases:  # a phase may run twice (a schema built again without guards)
                phases[p.name] = phases.get(p.name, 0.0) + 1000 * p.seconds
            out["phases_ms"] = dict(phases, **{"other compile work": 1000 * (t1 - t0) - sum(phases.values()),
                                               "first mask": 1000 * (t2 - t1)})
        for test in d.get("tests", []):
            text = json.dumps(test["data"], indent=None, ensure_ascii=False)
            ids = self.tok.encode(text, add_special_tokens=False).ids
            m = make()
            ok = True
            for t in ids:
                a = time.perf_counter_ns()
                m.fill()
                out["masks_us"].append((time.perf_counter_ns() - a) / 1000)
                if not _allowed(m.words(), t) or not m.advance(t):
                    ok = False
                    break
            if ok:
                m.fill()
                ok = bool(m.accepting())
            out["tests"].append([bool(test["valid"]), ok])
        return out


_WARM_UP = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["name"]}


class _OC:
    """outlines-core's Guide behind the engine_bench interface."""

    def __init__(self, guide, n: int):
        self.g = guide
        self.buf = np.zeros((n + 31) // 32, dtype=np.int32)

    def fill(self):
        self.g.write_mask_into(self.buf.ctypes.data, self.buf.size, 4)

    def words(self):
        return self.buf

    def advance(self, tok):
        try:
            self.g.advance(tok)
            return True
        except ValueError:
            return False

    def accepting(self):
        return self.g.is_finished()


def _allowed(words: np.ndarray, t: int) -> bool:
    return bool((int(words[t >> 5]) >> (t & 31)) & 1)


def worker_main(engine: str, tokdir: str, whitespace: str, property_order: str) -> None:
    from cad_outlines.engine.frontend.json_schema import SchemaOrderWarning

    warnings.simplefilter("ignore", SchemaOrderWarning)  # an object kept in declared order: measured as it is
    peer = _Peer(engine, Path(tokdir), whitespace, property_order)
    peer.warm_up()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        res = peer.run(line.strip())
        print(json.dumps(res), flush=True)


# ---------------------------------------------------------------------------------------------------------
# the driver


class _Worker:
    def __init__(self, engine: str, tokdir: Path, whitespace: str, property_order: str):
        self.args = [sys.executable, "-m", "analysis.maskbench", "--worker", engine, str(tokdir), whitespace,
                     property_order]
        self.proc = None

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=REPO, stderr=subprocess.DEVNULL)
        self._read(600)

    def _read(self, timeout: float) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"error": "worker died"}

    def run(self, path: str, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(path + "\n")
        self.proc.stdin.flush()
        got = self._read(timeout)
        if got is None:
            self.stop()
            return {"file": path, "timeout": True}
        if got.get("error") == "worker died":
            self.stop()
        return got

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _category(path: Path, maskbench: bool) -> str:
    if maskbench:
        name = path.name
        return name.split("---")[0] if "---" in name else name.rsplit("_", 1)[0]
    return path.parent.name


def _sample(files: list[Path], per: int, maskbench: bool, seed: int) -> list[Path]:
    by: dict[str, list[Path]] = defaultdict(list)
    for f in sorted(files):
        by[_category(f, maskbench)].append(f)
    out = []
    for cat, fs in sorted(by.items()):
        random.Random(f"{seed}:{cat}").shuffle(fs)
        out += fs[:per] if per else fs
    return out


def _version(engine: str) -> str:
    from importlib.metadata import version

    if engine == "ours":
        h = hashlib.sha256()
        for p in sorted([*(REPO / "cad_outlines").rglob("*.py"), *(REPO / "cad_outlines" / "_native" / "src").glob("*")]):
            h.update(p.read_bytes())
        return "ours-" + h.hexdigest()[:12]
    return version({"outlines-core": "outlines_core"}.get(engine, engine))


def run(args) -> int:
    from tqdm.auto import tqdm

    from .streamlining import _data

    jsb = Path(args.jsb)
    if not (jsb / "maskbench" / "data").is_dir():
        raise SystemExit(f"{jsb} is not a clone of guidance-ai/jsonschemabench (no maskbench/data): "
                         "git clone https://github.com/guidance-ai/jsonschemabench and pass its folder")
    mb = _sample(list((jsb / "maskbench" / "data").glob("*.json")), args.maskbench_per_category, True, args.seed)
    js = _sample([p for p in (jsb / "data").glob("*/*.json")], args.jsb_per_category, False, args.seed)
    engines = [e for e in args.engines.split(",") if e]
    toks = [t for t in args.tokenizers.split(",") if t]
    data = _data()
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    only = {t: set(es.split(",")) for t, es in (part.split(":", 1) for part in args.engines_for.split(";") if part)}
    results: dict = {}
    computed = 0
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    for tok in toks:
        tokdir = data / "tokenizers" / tok
        for engine in engines:
            if tok in only and engine not in only[tok]:
                continue
            ver = _version(engine)
            w = _Worker(engine, tokdir, args.whitespace, args.property_order)
            for corpus, files in (("MaskBench", mb), ("JSONSchemaBench", js)):
                bar = tqdm(files, desc=f"{engine} {tok} {corpus}", leave=False)
                for f in bar:
                    key = hashlib.sha256(f"{METHOD}|{ver}|{tok}|{args.whitespace}|{args.property_order}|"
                                         f"{args.timeout}|".encode()
                                         + f.read_bytes())
                    cpath = cache / f"{key.hexdigest()[:32]}.json"
                    if cpath.is_file() and not args.fresh:
                        res = json.loads(cpath.read_text())
                    else:
                        res = w.run(str(f), args.timeout)
                        cpath.write_text(json.dumps(res))
                        computed += 1
                    results[(tok, engine, corpus, _category(f, corpus == "MaskBench"), f.name)] = res
            w.stop()
    elapsed = time.perf_counter() - started
    args.load = (load_start, os.getloadavg()[0])
    text = _report(args, results, engines, toks, len(mb), len(js), elapsed, computed)
    print(text)
    write_report(args.out_dir, "maskbench", "MaskBench and JSONSchemaBench: JSON Schema engines side by side", text,
                 "python -m analysis maskbench " + " ".join(sys.argv[2:]))
    return 0


def _pct(xs, q) -> str:
    return f"{np.percentile(xs, q):,.2f}" if len(xs) else "-"


def _report(args, results, engines, toks, n_mb, n_js, elapsed, computed) -> str:
    import platform

    from .engine_bench import _version as pkg_version

    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}; "
             f"llguidance {pkg_version('llguidance')}, xgrammar {pkg_version('xgrammar')}, outlines-core "
             f"{pkg_version('outlines_core')}; ours with whitespace={args.whitespace!r}, "
             f"property_order={args.property_order!r}. {n_mb} MaskBench schemas, "
             f"{n_js} JSONSchemaBench schemas (`--jsb-per-category {args.jsb_per_category}` per category, seed "
             f"{args.seed}); {args.timeout:g} s per schema and engine; {elapsed / 60:.1f} min in all, {computed} of "
             f"{len(results)} results computed in this run (the rest read from the cache, keyed by engine version, "
             f"tokenizer, options and schema). Load average {args.load[0]:.1f} at the start, {args.load[1]:.1f} at the "
             f"end, on {os.cpu_count()} cores: above the core count, wall times include waiting for other processes "
             "(the CPU column does not).", "",
             "Coverage: schemas compiled (time-outs count as not compiled). TTFM: compile + first mask, ms, over "
             "the schemas the engine compiled (wall clock; CPU: the worker process's CPU time, all its threads, "
             "which a loaded machine does not inflate). Mask: per token during teacher forcing, us. "
             "False rejections / "
             "admissions: MaskBench instances, over the schemas the engine compiled.", ""]
    for tok in toks:
        for corpus in ("MaskBench", "JSONSchemaBench"):
            rows = []
            cats = sorted({k[3] for k in results if k[0] == tok and k[2] == corpus})
            for cat in cats + ["all"]:
                for engine in engines:
                    rs = [r for k, r in results.items() if k[0] == tok and k[1] == engine and k[2] == corpus
                          and (cat == "all" or k[3] == cat)]
                    if not rs:
                        continue
                    ok = [r for r in rs if "ttfm_ms" in r]
                    tt = [r["ttfm_ms"] for r in ok]
                    tc = [r["ttfm_cpu_ms"] for r in ok]
                    masks = [x for r in ok for x in r.get("masks_us", [])]
                    tests = [t for r in ok for t in r.get("tests", [])]
                    fr = sum(1 for v, a in tests if v and not a)
                    fa = sum(1 for v, a in tests if not v and a)
                    nv = sum(1 for v, _ in tests if v)
                    rows.append([cat, engine, f"{len(ok)}/{len(rs)}", sum(1 for r in rs if r.get("timeout")),
                                 _pct(tt, 50), _pct(tt, 90), _pct(tc, 50), f"{np.mean(masks):,.1f}" if masks else "-",
                                 _pct(masks, 99), f"{fr}/{nv}" if corpus == "MaskBench" else "-",
                                 f"{fa}/{len(tests) - nv}" if corpus == "MaskBench" else "-"])
            lines += [f"## {corpus}, {tok}", "", markdown_table(
                ["category", "engine", "compiled", "time-outs", "TTFM p50", "TTFM p90", "TTFM CPU p50", "mask mean",
                 "mask p99",
                 "false rej.", "false adm."], rows), ""]
    lines += _ttfm_on_common(results, engines, toks)
    lines += _ours_phases(results, toks)
    lines += _correctness_on_common(results, engines, toks, args.property_order)
    errors: dict = defaultdict(lambda: defaultdict(int))
    for k, r in results.items():
        if "error" in r and k[0] == toks[0]:
            errors[k[1]][r["error"][:110]] += 1
    for engine in engines:
        if errors.get(engine):
            lines += [f"### {engine}: most frequent refusals ({toks[0]})", ""]
            lines += [f"- {n} x `{msg}`" for msg, n in sorted(errors[engine].items(), key=lambda x: -x[1])[:12]]
            lines.append("")
    return "\n".join(lines)


def _ttfm_on_common(results, engines, toks) -> list[str]:
    """Time to first mask over the MaskBench schemas every engine run compiled: the same schemas for each
    (the tables above take each engine over the schemas it compiled, ours over more of the hard ones)."""
    rows = []
    for tok in toks:
        ran = [e for e in engines if any(k[:3] == (tok, e, "MaskBench") for k in results)]
        if len(ran) < 2:
            continue
        common = None
        for e in ran:
            got = {k[4] for k, r in results.items() if k[:3] == (tok, e, "MaskBench") and "ttfm_ms" in r}
            common = got if common is None else common & got
        for e in ran:
            rs = [r for k, r in results.items() if k[:3] == (tok, e, "MaskBench") and k[4] in common]
            tt, tc = [r["ttfm_ms"] for r in rs], [r["ttfm_cpu_ms"] for r in rs]
            rows.append([tok, e, len(rs), _pct(tt, 50), _pct(tt, 90), _pct(tc, 50)])
    if not rows:
        return []
    return ["## Time to first mask on the schemas every engine compiled (MaskBench)", "",
            markdown_table(["tokenizer", "engine", "schemas", "TTFM p50", "TTFM p90", "TTFM CPU p50"], rows), ""]


def _ours_phases(results, toks) -> list[str]:
    """Ours: the time to first mask by phase (wall ms, p50 and mean over the MaskBench schemas compiled)."""
    lines = []
    for tok in toks:
        rs = [r for k, r in results.items() if k[:3] == (tok, "ours", "MaskBench") and "phases_ms" in r]
        if not rs:
            continue
        names = list(dict.fromkeys(n for r in rs for n in r["phases_ms"]))
        rows = [[n, _pct([r["phases_ms"].get(n, 0.0) for r in rs], 50),
                 f"{np.mean([r['phases_ms'].get(n, 0.0) for r in rs]):,.2f}"] for n in names]
        rows.append(["time to first mask", _pct([r["ttfm_ms"] for r in rs], 50),
                     f"{np.mean([r['ttfm_ms'] for r in rs]):,.2f}"])
        lines += [f"## Ours: where the time to first mask goes (MaskBench, {tok}, {len(rs)} schemas)", "",
                  "Each phase of `compile_json_schema` (CompileProfile), the work around them, then the first "
                  "`fill_next_token_bitmask`; wall ms. \"lark load\" is the JSON Schema front end (rules and "
                  "terminal DFAs, in Python); \"lexer configurations\" the native byte automaton over the "
                  "terminals; \"parse tables\" the native LALR(1) tables and their arrays.", "",
                  markdown_table(["phase", "p50", "mean"], rows), ""]
    return lines


def _correctness_on_common(results, engines, toks, order: str) -> list[str]:
    """MaskBench correctness split by whether llguidance compiles the schema: the valid instances of the
    schemas llguidance compiles follow its stable property order (schema order); those of the schemas it
    refuses keep the order they were generated in, so an engine with a fixed property order rejects some
    of them although its grammar is exact in that order."""
    if "llguidance" not in engines:
        return []
    rows = []
    for tok in toks:
        llg = {k[4] for k, r in results.items() if k[:3] == (tok, "llguidance", "MaskBench") and "ttfm_ms" in r}
        for engine in engines:
            if not any(k[:3] == (tok, engine, "MaskBench") for k in results):
                continue  # not run with this tokenizer (--engines-for)
            for inside in (True, False):
                tests = [t for k, r in results.items() if k[:3] == (tok, engine, "MaskBench") and "ttfm_ms" in r
                         and (k[4] in llg) == inside for t in r.get("tests", [])]
                nv = sum(1 for v, _ in tests if v)
                rows.append([tok, engine, "compiled by llguidance" if inside else "refused by llguidance",
                             f"{sum(1 for v, a in tests if v and not a)}/{nv}",
                             f"{sum(1 for v, a in tests if not v and a)}/{len(tests) - nv}"])
    return ["## MaskBench correctness, by whether llguidance compiles the schema", "",
            "MaskBench's valid instances follow llguidance's stable property order (schema order) where llguidance "
            "compiles the schema (its README, 2025-03-21: properties reordered to follow it); where it refuses "
            "the schema they keep the order they were generated in, and an engine with a fixed property order "
            "(xgrammar; ours with `--property-order declared`) rejects those written in another order. Ours here: "
            f"property_order={order!r}.", "",
            markdown_table(["tokenizer", "engine", "schemas", "false rej.", "false adm."], rows), ""]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(*sys.argv[2:6])
