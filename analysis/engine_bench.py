"""Engine benchmark: compile time, load time and per-token mask time, side by side with llguidance and xgrammar.

For every grammar x tokenizer pair:

1. **Cold compile** (``compile_grammar(..., cache=False)``) in a fresh subprocess: wall time of the call,
   the lexer configurations and mask-store rows it built, and the subprocess's peak RSS (``ru_maxrss``;
   it includes the interpreter, numpy/lark imports and the loaded vocabulary, so the peak *before*
   compiling is reported too).
2. **Warm load**: ``compile_grammar`` with a private cache folder that holds the store, in another fresh
   subprocess. If the folder does not hold it yet, a first subprocess builds and saves it (reported as
   "fill") and the load is measured by a second one.
3. **Per-token mask time**, teacher-forcing real documents (tokenised with the HF tokenizer, no special
   tokens) through our :class:`~cad_outlines.engine.matcher.Matcher`, llguidance and xgrammar in lockstep:
   at each position every engine fills its packed int32 bitmask (timed: mask computation only), the
   masks are compared, then each engine consumes the document's token (timed separately). After the last
   token of a complete document every engine must allow its EOS token.
4. Refusals of llguidance / xgrammar are recorded with their message.

Grammars with ``%import`` are given to llguidance and xgrammar with the imports inlined *textually*: the
imported definitions, and every definition they reference, are copied from the ``common.lark`` that lark
itself resolves (the grammar's folder first, then lark's bundled grammars); the inlined grammar is checked
to load in lark with the same terminal regexes as the original.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .report import markdown_table, write_report

DESCRIPTION = "engine compile/load time, memory and per-token mask time vs llguidance and xgrammar"

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class GrammarSpec:
    name: str
    path: str  # "data:..." (shared data folder) or "repo:..."
    start: str | None = None
    python_indent: bool = False


GRAMMARS = {
    "json": GrammarSpec("json", "data:grammars/outlines/json.lark"),
    "sql": GrammarSpec("sql", "data:grammars/syncode/sql.lark"),
    "copy_edit": GrammarSpec("copy_edit", "repo:grammars/copy_edit.lark"),
    "python": GrammarSpec("python", "data:grammars/lark/python.lark", start="file_input", python_indent=True),
}
TOKENIZERS = ["gpt2", "qwen2.5"]
QUICK = (["json", "copy_edit"], ["gpt2"])
COPY_EDIT_CASES = 30
# Standard-library modules tried in this order for the Python document set (those lark's python.lark parses
# with the basic lexer are kept until --python-tokens is reached under every tokenizer).
PYTHON_CANDIDATES = ["textwrap.py", "heapq.py", "base64.py", "random.py", "calendar.py", "pprint.py", "shlex.py",
                     "queue.py", "cmd.py", "dataclasses.py", "copy.py", "glob.py", "fnmatch.py", "colorsys.py"]
SAMPLES = "grammars/outlines/historical/cfg_samples"
ENGINES = ("ours", "llguidance", "xgrammar")


def shared_data_dir() -> Path | None:
    env = os.environ.get("CAD_OUTLINES_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


def _resolve(spec: str, data: Path) -> Path:
    kind, rel = spec.split(":", 1)
    return REPO / rel if kind == "repo" else data / rel


# ---------------------------------------------------------------------------------------------------------------
# grammar text for the other engines

_DEF = re.compile(r"^(?P<name>[?!]?[A-Za-z_][A-Za-z_0-9]*)(?P<prio>\.-?\d+)?(?P<params>\{[^}]*\})?\s*:")
_IMPORT = re.compile(r"^%import\s+(?P<mod>[\w.]+?)(?:\.(?P<name>\w+)(?:\s*->\s*(?P<alias>\w+))?|\s*\((?P<names>[^)]*)\))\s*(?://.*)?$")
_LITERALS = re.compile(r'"(?:[^"\\\n]|\\.)*"i?|/(?:[^/\\\n]|\\.)+/[imslux]*')


def _lark_stdlib_dir() -> Path:
    import lark

    return Path(lark.__file__).resolve().parent / "grammars"


def _definitions(text: str) -> dict[str, str]:
    """name -> full definition text (continuation lines included), in file order."""
    defs: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = _DEF.match(line)
        if m:
            current = m.group("name").lstrip("?!")
            defs[current] = line
        elif current and line.strip() and not line.lstrip().startswith(("//", "%")) and line[:1] in (" ", "\t", "|"):
            defs[current] += "\n" + line
        else:
            current = None
    return defs


def _references(body: str) -> set[str]:
    body = body.split(":", 1)[1] if ":" in body else body
    body = re.sub(r"//[^\n]*", "", _LITERALS.sub(" ", body))
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body))


def inline_imports(text: str, import_dirs: list[Path]) -> tuple[str, list[str], bool]:
    """`text` with every ``%import module.NAME`` replaced by the definitions it needs, copied from the
    module file lark would load (first of `import_dirs`, then lark's bundled grammars). Returns
    (text, notes, whether some module came from outside lark's bundled grammars); raises ValueError on a
    name clash."""
    own = _definitions(text)
    lines, wanted, notes = [], {}, []
    for line in text.splitlines():
        m = _IMPORT.match(line.strip()) if line.startswith("%import") else None
        if not m:
            lines.append(line)
            continue
        mod = m.group("mod")
        names = [(m.group("name"), m.group("alias") or m.group("name"))] if m.group("name") else \
            [(n.strip(), n.strip()) for n in m.group("names").split(",") if n.strip()]
        for name, alias in names:
            wanted.setdefault(mod, []).append((name, alias))
    out = ["\n".join(lines).rstrip("\n")]
    local = False
    for mod, names in wanted.items():
        rel = Path(*mod.split(".")).with_suffix(".lark")
        path = next((d / rel for d in [*import_dirs, _lark_stdlib_dir()] if (d / rel).is_file()), None)
        if path is None:
            raise ValueError(f"%import {mod}: {rel} not found")
        local |= path.parent != _lark_stdlib_dir()
        defs = _definitions(path.read_text(encoding="utf-8"))
        needed: set[str] = set()
        todo = [n for n, _ in names]
        while todo:
            n = todo.pop()
            if n in needed:
                continue
            if n not in defs:
                raise ValueError(f"%import {mod}.{n}: not defined in {path}")
            needed.add(n)
            todo += [r for r in _references(defs[n]) if r in defs and r not in needed]
        aliases = dict(names)
        block = [f"// inlined from {path} (%import {mod}: {', '.join(sorted(aliases))})"]
        for n, body in defs.items():
            if n not in needed:
                continue
            new = aliases.get(n, n)
            if new in own:
                raise ValueError(f"%import {mod}.{n}: {new} is also defined by the grammar")
            block.append(body if new == n else new + body[len(n):])
        out.append("\n".join(block))
        notes.append(f"{mod}: {len(needed)} definitions from {path}")
    return "\n\n".join(out) + "\n", notes, local


def strip_priorities(text: str) -> str:
    """Rule and terminal priorities (``name.N:``) removed."""
    return re.sub(r"^([?!]?[A-Za-z_][A-Za-z_0-9]*)\.-?\d+(\s*:)", r"\1\2", text, flags=re.M)


def _lark(text: str, spec: GrammarSpec, import_dirs=()):
    import lark

    opts = dict(parser="lalr", lexer="basic", import_paths=[str(d) for d in import_dirs])
    if spec.start:
        opts["start"] = spec.start
    if spec.python_indent:
        from lark.indenter import PythonIndenter

        opts["postlex"] = PythonIndenter()
    return lark.Lark(text, **opts)


def check_inlined(original: str, inlined: str, spec: GrammarSpec, import_dirs) -> str:
    """'' if lark loads `inlined` with the same terminal regexes as `original`, else what differs."""
    a = {t.name: t.pattern.to_regexp() for t in _lark(original, spec, import_dirs).terminals}
    b = {t.name: t.pattern.to_regexp() for t in _lark(inlined, spec).terminals}
    diff = sorted(n for n in a if a[n] != b.get(n))
    return f"terminals differ: {', '.join(diff[:8])}" if diff else ""


# ---------------------------------------------------------------------------------------------------------------
# documents


@dataclass
class Document:
    name: str
    text: str


@dataclass
class DocSet:
    grammar: str
    docs: list[Document]
    candidates: int
    rejected: list[str] = field(default_factory=list)  # "name: why" for documents lark does not parse


def _parses(lk, text: str) -> str:
    try:
        lk.parse(text)
        return ""
    except Exception as e:  # noqa: BLE001 -- any lark error means "not in the language"
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


def load_documents(spec: GrammarSpec, grammar_path: Path, data: Path, token_counters, python_tokens: int) -> DocSet:
    lk = _lark(grammar_path.read_text(encoding="utf-8"), spec, [grammar_path.parent])
    candidates: list[Document] = []
    if spec.name == "json":
        candidates = [Document(f"json/{p.name}", p.read_text(encoding="utf-8"))
                      for p in sorted((data / SAMPLES / "json").glob("*.json"))]
    elif spec.name == "sql":
        candidates = [Document(f"sql_select/{p.name}", p.read_text(encoding="utf-8"))
                      for p in sorted((data / SAMPLES / "sql_select").glob("*.sql"))]
    elif spec.name == "copy_edit":
        from cad_outlines import oracle_program

        from .datasets import load_corpus

        for case in list(load_corpus("humanevalfix-python"))[:COPY_EDIT_CASES]:
            program = oracle_program(case.before, case.after)
            candidates.append(Document(f"oracle/{case.id}", program.to_text(header=False)))
    elif spec.name == "python":
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        totals = [0] * len(token_counters)
        docs, rejected, tried = [], [], 0
        for name in PYTHON_CANDIDATES:
            if totals and min(totals) >= python_tokens:
                break
            path = stdlib / name
            if not path.is_file():
                continue
            tried += 1
            text = path.read_text(encoding="utf-8")
            why = _parses(lk, text)
            if why:
                rejected.append(f"stdlib/{name}: {why}")
                continue
            docs.append(Document(f"stdlib/{name}", text))
            totals = [t + count(text) for t, count in zip(totals, token_counters)]
        return DocSet(spec.name, docs, tried, rejected)
    docs, rejected = [], []
    for d in candidates:
        why = _parses(lk, d.text)
        (rejected.append(f"{d.name}: {why}") if why else docs.append(d))
    return DocSet(spec.name, docs, len(candidates), rejected)


# ---------------------------------------------------------------------------------------------------------------
# compile / load in subprocesses

_CHILD = r"""
import json, os, resource, sys, time
spec = json.loads(sys.argv[1])
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.vocabulary import Vocabulary
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
hwm = lambda: status("VmHWM")
vocab = Vocabulary.from_tokenizer(spec["tokenizer"])
vocab.content_hash
base, rss0 = hwm(), status("VmRSS")
cache = spec["cache"] or False
listing = lambda: set(os.listdir(cache)) if cache and os.path.isdir(cache) else set()
before = listing()
t = time.perf_counter()
g = compile_grammar(spec["grammar"], vocab, start=spec["start"], cache=cache, progress=False)
g.native  # ready to mask: the native grammar over the (memory-mapped) flat arrays
seconds = time.perf_counter() - t
peak = hwm()
print("@@" + json.dumps(dict(seconds=seconds, peak_kib=peak, base_kib=base, n_rows=g.flat.meta["n_rows"],
                             ru_maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                             rss_added_kib=status("VmRSS") - rss0, file_bytes=g.flat.nbytes,
                             n_configs=g.native.n_configs, built=bool(listing() - before))))
"""


def compile_in_subprocess(grammar: Path, start: str | None, tokenizer: Path, cache: Path | None,
                          timeout: float = 7200) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    spec = dict(grammar=str(grammar), start=start, tokenizer=str(tokenizer), cache=str(cache) if cache else None)
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True,
                          env=env, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"compile subprocess failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return json.loads(lines[-1][2:])


# ---------------------------------------------------------------------------------------------------------------
# engines


class _Engine:
    """One engine's matcher over one document: ``fill()`` (timed), ``bits()``, ``advance(tok)`` (timed)."""

    name = ""
    eos = 0

    def fill(self) -> None: ...

    def bits(self, n: int) -> np.ndarray:
        """The first `n` token bits as bools (zeros beyond the engine's width)."""
        b = np.unpackbits(np.ascontiguousarray(self.words()).view(np.uint8), bitorder="little")[:n].astype(bool)
        return b if len(b) == n else np.concatenate([b, np.zeros(n - len(b), dtype=bool)])

    def words(self) -> np.ndarray: ...

    def advance(self, tok: int) -> bool: ...

    def accepting(self) -> bool: ...

    def error(self) -> str:
        return ""


class Ours(_Engine):
    name = "ours"

    def __init__(self, compiled):
        from cad_outlines.engine.matcher import Matcher

        self.m = Matcher(compiled)
        self.buf = np.zeros((compiled.vocab_size + 31) // 32, dtype=np.int32)
        self.eos = compiled.eos_token_ids[0]

    def fill(self):
        self.m.fill_next_token_bitmask(self.buf)

    def words(self):
        return self.buf

    def advance(self, tok):
        from cad_outlines.engine.matcher import InvalidTokenError

        try:
            self.m.advance(tok)
            return True
        except InvalidTokenError as e:
            self._err = str(e)
            return False

    def accepting(self):
        return self.m.is_accepting()


class LLG(_Engine):
    name = "llguidance"

    def __init__(self, tok, grammar):
        import llguidance
        import llguidance.numpy

        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.m = llguidance.LLMatcher(tok, grammar)
        self.buf = llguidance.numpy.allocate_token_bitmask(1, tok.vocab_size)
        self.eos = tok.eos_token

    def fill(self):
        self._fill(self.m, self.buf, 0)

    def words(self):
        return self.buf[0]

    def advance(self, tok):
        return bool(self.m.consume_token(tok)) and not self.m.is_error()

    def accepting(self):
        return self.m.is_accepting()

    def error(self):
        return self.m.get_error() if self.m.is_error() else ""


class XGR(_Engine):
    name = "xgrammar"

    def __init__(self, compiled, info):
        import xgrammar as xg

        self.m = xg.GrammarMatcher(compiled)
        self.buf = xg.allocate_token_bitmask(1, info.vocab_size)
        self.np = self.buf.numpy()
        self.eos = info.stop_token_ids[0]

    def fill(self):
        self.m.fill_next_token_bitmask(self.buf)

    def words(self):
        return self.np[0]

    def advance(self, tok):
        return bool(self.m.accept_token(tok))

    def accepting(self):
        return self.m.is_terminated() or bool(self.np[0][self.eos >> 5] >> (self.eos & 31) & 1)


def _has(words: np.ndarray, tok: int) -> bool:
    return bool((int(words[tok >> 5]) >> (tok & 31)) & 1)


@dataclass
class EngineRun:
    """What one engine did over one grammar x tokenizer document set."""

    engine: str
    label: str = ""  # e.g. "llguidance (priorities stripped)"
    mask_ns: list[int] = field(default_factory=list)
    pos: list[int] = field(default_factory=list)  # global position index of each mask_ns entry
    advance_ns: list[int] = field(default_factory=list)
    bool_ns: list[int] = field(default_factory=list)  # ours: allowed_mask() (bool form) at the same positions
    parser_calls: list[int] = field(default_factory=list)  # ours: per mask computation
    advance_calls: list[int] = field(default_factory=list)  # ours: per advance
    rejections: list[str] = field(default_factory=list)
    slowest: tuple = (0, "", 0, "", 0, 0)  # ours: (ns, document, position, text before, parser calls, GC ns)
    gc_positions: int = 0  # ours: mask computations during which the garbage collector ran
    gc_ns: int = 0  # ... and the time it took in them
    stopped: int = 0  # positions done when the --engine-budget ran out (0: ran to the end)
    setup_s: float = 0.0  # llguidance: matcher creation (grammar compile); xgrammar: compile_grammar
    # mask comparison with ours (non-special tokens; EOS compared separately)
    compared: int = 0
    equal: int = 0
    diff_tokens: int = 0
    only_ours: int = 0
    only_theirs: int = 0
    eos_diff: int = 0
    added_diff: int = 0  # positions where the masks differ on non-special added tokens (compared apart)
    added_only_ours: int = 0
    examples: list[str] = field(default_factory=list)  # distinct kinds of difference, first seen first
    seen: set = field(default_factory=set)


class _GCClock:
    """Time spent in Python's garbage collector (``gc.callbacks``), so that a mask time can say it includes a
    collection."""

    def __init__(self):
        self.ns = self.count = self._t = 0

    def __call__(self, phase, _info):
        if phase == "start":
            self._t = time.perf_counter_ns()
        else:
            self.ns += time.perf_counter_ns() - self._t
            self.count += 1


GC_CLOCK = _GCClock()


class _Lazy:
    def __init__(self, f):
        self.f, self.v = f, None

    def get(self) -> str:
        if self.v is None:
            self.v = self.f()
        return self.v


def _ctx(text: _Lazy, n: int = 40) -> str:
    return repr(text.get()[-n:])


def _show(ids: np.ndarray, token_bytes) -> str:
    return ", ".join(repr(token_bytes(int(t))) for t in ids[:4]) + (" ..." if len(ids) > 4 else "")


def teacher_force(docs: list[Document], encode, ours_factory, others: list[tuple[EngineRun, object]],
                  max_tokens: int | None, token_bytes, compare_ok: np.ndarray, dec,
                  budget_s: float | None = None, added: np.ndarray | None = None) -> tuple[EngineRun, int, int]:
    """Run every document through every engine in lockstep. Returns (ours, positions, documents used).
    An other engine whose summed mask time passes `budget_s` is stopped (``EngineRun.stopped``). Masks are
    compared where `compare_ok`; the ids in `added` (non-special added tokens) are counted apart."""
    budget_ns = float("inf") if budget_s is None else budget_s * 1e9
    if GC_CLOCK not in gc.callbacks:
        gc.callbacks.append(GC_CLOCK)
    spent: dict[int, int] = {}
    ours = EngineRun("ours")
    budget = max_tokens if max_tokens is not None else float("inf")
    positions = used = 0
    n_cmp = len(compare_ok)
    for doc in docs:
        if budget <= 0:
            break
        ids = list(encode(doc.text))
        complete = len(ids) <= budget
        ids = ids[: int(min(len(ids), budget))]
        budget -= len(ids)
        used += 1
        gc.collect()
        engines: list[tuple[EngineRun, _Engine]] = [(ours, ours_factory())]
        for run, factory in others:
            if run.stopped:
                continue
            try:
                engines.append((run, factory()))
            except Exception as e:  # noqa: BLE001
                run.rejections.append(f"{doc.name}: matcher creation failed: {str(e)[:200]}")
        alive = [True] * len(engines)
        steps = ids + [None] if complete else ids
        for pos, tok in enumerate(steps):
            prefix = _Lazy(lambda: dec(ids[:pos]))
            excluded = [False] * len(engines)
            for i, (run, eng) in enumerate(engines):
                if not alive[i]:
                    continue
                c0 = eng.m.parser_checks if run is ours else 0
                g0, gns0 = GC_CLOCK.count, GC_CLOCK.ns
                t0 = time.perf_counter_ns()
                eng.fill()
                t1 = time.perf_counter_ns()
                gc_ns = GC_CLOCK.ns - gns0 if GC_CLOCK.count != g0 else 0
                run.mask_ns.append(t1 - t0)
                run.pos.append(positions)
                if run is ours:
                    run.parser_calls.append(eng.m.parser_checks - c0)
                    if gc_ns:
                        run.gc_positions += 1
                        run.gc_ns += gc_ns
                    if t1 - t0 > run.slowest[0]:
                        run.slowest = (t1 - t0, doc.name, pos, _ctx(prefix, 50), run.parser_calls[-1], gc_ns)
                    t0 = time.perf_counter_ns()
                    as_bool = eng.m.allowed_mask()
                    run.bool_ns.append(time.perf_counter_ns() - t0)
                    if not np.array_equal(as_bool, eng.bits(len(as_bool))):
                        run.rejections.append(f"{doc.name} @ {pos}: fill_next_token_bitmask and allowed_mask disagree "
                                              f"(after {_ctx(prefix)})")
                else:
                    spent[id(run)] = spent.get(id(run), 0) + t1 - t0
                    if spent[id(run)] > budget_ns:
                        run.stopped = len(run.mask_ns)
                want = eng.eos if tok is None else tok
                excluded[i] = not _has(eng.words(), want)
                if excluded[i] and tok is None:
                    run.rejections.append(_short(f"{doc.name} @ {pos}: EOS not allowed at the end (after "
                                                 f"{_ctx(prefix)}) {eng.error()}", 300))
            positions += 1
            # compare masks with ours
            if alive[0]:
                mine = engines[0][1].bits(n_cmp)
                my_eos = _has(engines[0][1].words(), engines[0][1].eos)
                for i, (run, eng) in enumerate(engines[1:], 1):
                    if not alive[i]:
                        continue
                    theirs = eng.bits(n_cmp)
                    if added is not None and len(added):
                        run.added_diff += bool((mine[added] != theirs[added]).any())
                        run.added_only_ours += int((mine[added] & ~theirs[added]).sum())
                    diff = (mine != theirs) & compare_ok
                    their_eos = _has(eng.words(), eng.eos)
                    run.compared += 1
                    nd = int(diff.sum())
                    if nd == 0 and my_eos == their_eos:
                        run.equal += 1
                        continue
                    run.diff_tokens += nd
                    oo = np.flatnonzero(diff & mine)
                    ot = np.flatnonzero(diff & theirs)
                    run.only_ours += len(oo)
                    run.only_theirs += len(ot)
                    run.eos_diff += my_eos != their_eos
                    sig = (tuple(oo[:4]), tuple(ot[:4]), my_eos, their_eos)
                    if len(run.examples) < 8 and sig not in run.seen:
                        run.seen.add(sig)
                        run.examples.append(
                            f"{doc.name} @ {pos} after {_ctx(prefix, 30)}: only ours {len(oo)} [{_show(oo, token_bytes)}], "
                            f"only {run.engine} {len(ot)} [{_show(ot, token_bytes)}]"
                            + (f", EOS ours={my_eos} theirs={their_eos}" if my_eos != their_eos else ""))
            if tok is None:
                for i, (run, eng) in enumerate(engines):
                    if alive[i] and not eng.accepting():
                        run.rejections.append(f"{doc.name}: not accepting at the end")
                break
            for i, (run, eng) in enumerate(engines):
                if not alive[i]:
                    continue
                c0 = eng.m.parser_checks if run is ours else 0
                t0 = time.perf_counter_ns()
                ok = eng.advance(tok)
                t1 = time.perf_counter_ns()
                run.advance_ns.append(t1 - t0)
                if run is ours:
                    run.advance_calls.append(eng.m.parser_checks - c0)
                if run.stopped:
                    alive[i] = False
                if excluded[i] and ok:
                    run.rejections.append(f"{doc.name} @ {pos}: token {tok} {token_bytes(tok)!r} is not in the mask "
                                          f"but was accepted when consumed (after {_ctx(prefix)}): inconsistent")
                if not ok:
                    alive[i] = False
                    why = getattr(eng, "_err", "") or eng.error()
                    run.rejections.append(_short(
                        f"{doc.name} @ {pos}: token {tok} {token_bytes(tok)!r} "
                        f"{'not in the mask and ' if excluded[i] else 'in the mask but '}refused when consumed, after "
                        f"{_ctx(prefix)}: {_short(why, 160)} -- rest of the document skipped", 400))
    return ours, positions, used


def batch_and_phases(compiled, docs: list[Document], encode, batch: int, rounds: int = 40) -> dict:
    """`batch` matchers spread over the documents (each at its own position), then `rounds` steps: per step the
    masks of all of them as ONE ``fill_next_token_bitmask_batch`` call vs `batch` single
    ``fill_next_token_bitmask`` calls (alternating which goes first), then every matcher advances one token.
    Also where a single mask's time goes (native phases), summed over the same positions."""
    from cad_outlines.engine.matcher import Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch

    streams = [list(encode(d.text)) for d in docs]
    streams = [s for s in streams if len(s) > rounds + 2]
    total = sum(len(s) for s in streams)
    if not streams:
        return {}
    matchers, cursors = [], []
    for k in range(batch):  # start k at offset k * total / batch of the concatenated documents
        target = k * (total - (rounds + 2) * len(streams)) // batch
        for si, s in enumerate(streams):
            room = len(s) - rounds - 2
            if target < room:
                break
            target -= room
        m = Matcher(compiled)
        m.advance_many(streams[si][:target])
        matchers.append(m)
        cursors.append((si, target))
    bits = allocate_token_bitmask(batch, compiled.vocab_size)
    single = allocate_token_bitmask(batch, compiled.vocab_size)
    t_batch, t_single, phases = [], [], np.zeros(4, dtype=np.int64)
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for which in order:
            t0 = time.perf_counter_ns()
            if which == 0:
                fill_next_token_bitmask_batch(matchers, bits)
                t_batch.append(time.perf_counter_ns() - t0)
            else:
                for i, m in enumerate(matchers):
                    m.fill_next_token_bitmask(single[i])
                t_single.append(time.perf_counter_ns() - t0)
        if not np.array_equal(bits, single):
            raise RuntimeError("batch and single masks differ")
        for i, m in enumerate(matchers):
            phases += np.asarray(m._m.fill_profiled(single[i]))
            si, pos = cursors[i]
            m.advance(streams[si][pos])
            cursors[i] = (si, pos + 1)
    from cad_outlines._native import core

    b, s1 = float(np.mean(t_batch)) / 1e3, float(np.mean(t_single)) / 1e3
    return dict(batch=batch, rounds=rounds, batch_us=b, singles_us=s1, ratio=b / s1, threads=core().pool_threads(),
                phases_us=(phases / (rounds * batch) / 1e3).tolist())


# ---------------------------------------------------------------------------------------------------------------
# study


def add_arguments(parser) -> None:
    parser.add_argument("--grammars", default=",".join(GRAMMARS), help=f"comma-separated, of {', '.join(GRAMMARS)}")
    parser.add_argument("--tokenizers", default=",".join(TOKENIZERS),
                        help="comma-separated tokenizer folders under the shared data's tokenizers/ (or paths)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="teacher-forced tokens per grammar x tokenizer document set at most (default: all)")
    parser.add_argument("--python-tokens", type=int, default=20000,
                        help="stdlib files for the Python set are added until this many tokens under every tokenizer")
    parser.add_argument("--quick", action="store_true", help="GPT-2 with json and copy_edit only")
    parser.add_argument("--skip-cold", action="store_true",
                        help="measure the warm load only (no cold compile; the cache folder is filled if needed)")
    parser.add_argument("--batch", type=int, default=32, help="sequences per batch in the batch-mask measurement")
    parser.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "cad_outlines_engine_bench"),
                        help="private mask-store cache for the warm loads (and the in-process matchers)")
    parser.add_argument("--engine-budget", type=float, default=60.0,
                        help="seconds of mask time per other engine per grammar x tokenizer before it is stopped")
    parser.add_argument("--skip-compile-bench", action="store_true",
                        help="no cold compile / warm load subprocesses (the in-process grammar still uses --cache-dir)")
    parser.add_argument("--no-compare", action="store_true", help="our engine only (no llguidance / xgrammar)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"), help="where the report goes")


def _stats(ns: list[int]) -> tuple[float, float, float, float]:
    if not ns:
        return (float("nan"),) * 4
    a = np.asarray(ns, dtype=np.float64) / 1000.0
    return float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99)), float(a.max())


def _version(pkg: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "-"


def _fmt(x: float, digits: int = 1) -> str:
    return "-" if x != x else f"{x:,.{digits}f}"


def _ratio(a: float, b: float) -> str:
    return "-" if a != a or b != b or b == 0 else f"{a / b:.2f}"


def _short(msg: str, n: int = 160) -> str:
    msg = " ".join(msg.split())
    return (msg[: n - 3] + "...") if len(msg) > n else msg


@dataclass
class PairResult:
    grammar: str
    tokenizer: str
    cold: dict | None = None
    warm: dict | None = None
    fill: dict | None = None
    ours: EngineRun | None = None
    others: list[EngineRun] = field(default_factory=list)
    positions: int = 0
    docs_used: int = 0
    refusals: list[tuple[str, str]] = field(default_factory=list)  # (engine, message)
    added: list[str] = field(default_factory=list)  # the tokenizer's non-special added tokens (compared apart)
    store: tuple[int, int] | None = None  # (lexer configurations, mask-store rows) of the in-process grammar
    batch: dict | None = None  # batch_and_phases()
    error: str = ""


def _tokenizer_dir(name: str, data: Path) -> Path:
    p = Path(name)
    return p if p.exists() else data / "tokenizers" / name


def run(args) -> int:
    data = shared_data_dir()
    if data is None:
        raise SystemExit("shared data folder not found (set CAD_OUTLINES_DATA)")
    grammars, tokenizers = (QUICK if args.quick else
                            ([g.strip() for g in args.grammars.split(",") if g.strip()],
                             [t.strip() for t in args.tokenizers.split(",") if t.strip()]))
    unknown = [g for g in grammars if g not in GRAMMARS]
    if unknown:
        raise SystemExit(f"unknown grammar(s) {unknown}; known: {', '.join(GRAMMARS)}")
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.perf_counter()

    from transformers import PreTrainedTokenizerFast

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.vocabulary import Vocabulary

    toks = {}
    for name in tokenizers:
        d = _tokenizer_dir(name, data)
        hf = PreTrainedTokenizerFast.from_pretrained(str(d))
        toks[name] = dict(dir=d, hf=hf, vocab=Vocabulary.from_tokenizer(str(d)), llg=None, xgr=None, notes=[])
        if not args.no_compare:
            try:
                import llguidance.hf

                t = time.perf_counter()
                toks[name]["llg"] = llguidance.hf.from_tokenizer(hf)
                toks[name]["notes"].append(f"llguidance tokenizer {time.perf_counter() - t:.2f} s")
            except Exception as e:  # noqa: BLE001
                toks[name]["notes"].append(f"llguidance tokenizer failed: {_short(str(e))}")
            try:
                import xgrammar as xg

                t = time.perf_counter()
                toks[name]["xgr"] = xg.TokenizerInfo.from_huggingface(hf, vocab_size=toks[name]["vocab"].size)
                toks[name]["notes"].append(f"xgrammar TokenizerInfo {time.perf_counter() - t:.2f} s")
            except Exception as e:  # noqa: BLE001
                toks[name]["notes"].append(f"xgrammar tokenizer failed: {_short(str(e))}")

    counters = [(lambda text, hf=t["hf"]: len(hf.encode(text, add_special_tokens=False))) for t in toks.values()]
    results: list[PairResult] = []
    docsets: dict[str, DocSet] = {}
    inline_notes: dict[str, str] = {}
    for gname in grammars:
        spec = GRAMMARS[gname]
        gpath = _resolve(spec.path, data)
        docsets[gname] = load_documents(spec, gpath, data, counters, args.python_tokens)
        text = gpath.read_text(encoding="utf-8")
        # grammar variants for the other engines: (label, text, note)
        variants = []
        if not args.no_compare:
            other_text, local = text, False
            if "%import" in text:
                try:
                    other_text, notes, local = inline_imports(text, [gpath.parent])
                    bad = check_inlined(text, other_text, spec, [gpath.parent])
                    inline_notes[gname] = "; ".join(notes) + (
                        f"; CHECK FAILED: {bad}" if bad else "; lark loads it with identical terminal regexes")
                except ValueError as e:  # a name clash: the engines get the original text
                    inline_notes[gname] = f"not inlined ({e}); the engines resolve %import themselves"
            variants.append(("", other_text))
            if local:  # also the engines' own `%import common` (their bundled definitions differ from the local file)
                variants.append((" (own %import)", text))
        for tname in tokenizers:
            tk = toks[tname]
            res = PairResult(gname, tname)
            results.append(res)
            print(f"== {gname} x {tname}", flush=True)
            try:
                if not args.skip_compile_bench:
                    if not args.skip_cold:
                        res.cold = compile_in_subprocess(gpath, spec.start, tk["dir"], None)
                        print(f"   cold compile {res.cold['seconds']:.2f} s", flush=True)
                    w = compile_in_subprocess(gpath, spec.start, tk["dir"], cache)
                    if w["built"]:
                        res.fill, w = w, compile_in_subprocess(gpath, spec.start, tk["dir"], cache)
                    res.warm = w
                    print(f"   warm load {w['seconds']:.2f} s", flush=True)
                compiled = compile_grammar(str(gpath), tk["vocab"], start=spec.start, cache=cache, progress=False)
            except Exception as e:  # noqa: BLE001
                res.error = _short(str(e), 400)
                print("   " + res.error, flush=True)
                continue
            res.store = (compiled.native.n_configs, compiled.flat.meta["n_rows"])
            others = []
            for label, gtext in variants:
                others += _other_engines(res, tk, gtext, label, spec)
            hf = tk["hf"]
            vocab = tk["vocab"]
            n_cmp = vocab.tokenizer_size
            compare_ok = np.ones(n_cmp, dtype=bool)
            compare_ok[[i for i in vocab.special_ids if i < n_cmp]] = False
            added = np.array(sorted(i for i in hf.added_tokens_decoder if i < n_cmp and i not in vocab.special_ids),
                             dtype=np.int64)
            compare_ok[added] = False
            res.ours, res.positions, res.docs_used = teacher_force(
                docsets[gname].docs, lambda s: hf.encode(s, add_special_tokens=False), lambda: Ours(compiled),
                others, args.max_tokens, vocab.token_bytes.__getitem__, compare_ok,
                lambda ids: vocab.decode(ids).decode("utf-8", "replace"), args.engine_budget, added)
            res.added = [vocab.token_bytes[i].decode("utf-8", "replace") for i in added]
            res.batch = batch_and_phases(compiled, docsets[gname].docs, lambda s: hf.encode(s, add_special_tokens=False),
                                         args.batch)
            print(f"   batch of {args.batch}: one call {res.batch['batch_us']:.0f} us vs {args.batch} single calls "
                  f"{res.batch['singles_us']:.0f} us ({res.batch['ratio']:.2f}x)", flush=True)
            res.others = [r for r, _ in others]
            m = _stats(res.ours.mask_ns)
            print(f"   {res.positions} positions; ours mask mean {m[0]:.1f} us p99 {m[2]:.1f} us"
                  + "".join(f"; {r.engine}{r.label} mean {_stats(r.mask_ns)[0]:.1f} us" for r in res.others), flush=True)
    elapsed = time.perf_counter() - started
    body = _report(args, results, docsets, toks, inline_notes, load_before, os.getloadavg(), elapsed)
    out = Path(args.out_dir)
    png = _plot(results, out / "engine.png")
    if png:
        body += f"\n\n![per-token mask time distributions]({png.name})\n"
    words = ["--quick"] if args.quick else [
        *(["--grammars", args.grammars] if args.grammars != ",".join(GRAMMARS) else []),
        *(["--tokenizers", args.tokenizers] if args.tokenizers != ",".join(TOKENIZERS) else [])]
    for flag, value, default in (("--max-tokens", args.max_tokens, None), ("--python-tokens", args.python_tokens, 20000),
                                 ("--engine-budget", args.engine_budget, 60.0)):
        if value != default:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    words += [f for f, on in (("--skip-compile-bench", args.skip_compile_bench), ("--skip-cold", args.skip_cold),
                              ("--no-compare", args.no_compare)) if on]
    cmd = " ".join(["python -m cad_outlines.cli study engine-bench", *words])
    path = write_report(out, "engine", "Engine benchmark: compile, load and per-token mask time", body, cmd)
    print(f"wrote {path}")
    bad = any(r.error or (r.ours and r.ours.rejections) for r in results)
    return 1 if bad else 0


def _other_engines(res: PairResult, tk: dict, gtext: str, label: str, spec: GrammarSpec):
    """[(EngineRun, factory)] for llguidance and xgrammar on `gtext`; refusals go to res.refusals."""
    out = []
    if tk["llg"] is not None:
        import llguidance

        def try_llg(text: str, lab: str):
            grammar = llguidance.grammar_from("lark", text)
            msg = llguidance.LLMatcher.validate_grammar(grammar, tk["llg"])
            if msg:
                res.refusals.append(("llguidance" + lab, msg))
                return None
            run_ = EngineRun("llguidance", lab)
            t = time.perf_counter()
            probe = llguidance.LLMatcher(tk["llg"], grammar)
            run_.setup_s = time.perf_counter() - t
            if probe.is_error():
                res.refusals.append(("llguidance" + lab, probe.get_error()))
                return None
            return run_, (lambda: LLG(tk["llg"], grammar))

        got = try_llg(gtext, label)
        if got is None and "priorit" in res.refusals[-1][1]:
            got = try_llg(strip_priorities(gtext), label + " (priorities stripped)")
        if got:
            out.append(got)
    if tk["xgr"] is not None:
        import xgrammar as xg

        def try_xgr(text: str, lab: str):
            try:
                grammar = xg.Grammar.from_lark(text)
                t = time.perf_counter()
                compiled = xg.GrammarCompiler(tk["xgr"], cache_enabled=False).compile_grammar(grammar)
                run_ = EngineRun("xgrammar", lab, setup_s=time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001
                res.refusals.append(("xgrammar" + lab, f"{type(e).__name__}: {e}"))
                return None
            return run_, (lambda: XGR(compiled, tk["xgr"]))

        got = try_xgr(gtext, label)
        if got is None and "priorit" in res.refusals[-1][1]:
            got = try_xgr(strip_priorities(gtext), label + " (priorities stripped)")
        if got:
            out.append(got)
    return out


def _side_row(r: PairResult, run_: EngineRun, _o) -> tuple:
    s = _stats(run_.mask_ns)
    a = _stats(run_.advance_ns)
    mine = dict(zip(r.ours.pos, r.ours.mask_ns))
    o = _stats([mine[p] for p in run_.pos if p in mine])  # ours on the same positions
    return (r.grammar, r.tokenizer, run_.engine + run_.label,
            f"{len(run_.mask_ns)} (budget out)" if run_.stopped else len(run_.mask_ns), _fmt(s[0]), _fmt(s[1]), _fmt(s[2]),
            _fmt(s[3]), _fmt(a[0]), _ratio(o[0], s[0]), _ratio(o[1], s[1]), _ratio(o[2], s[2]),
            f"{run_.equal}/{run_.compared}")


KNOWN_DIFFERENCES = """Known sources of disagreement (each checked against lark when this study was written; ours follows lark):

- **Ignored text before the first token, and after the last.** lark (and our engine) accept `%ignore`d text
  (whitespace, SQL comments) at the very start and at the end; llguidance and xgrammar, as run here, disallow leading
  whitespace in JSON and reject SQL documents that start with a `--` comment at position 0; llguidance also refuses
  a last token that carries trailing whitespace (Qwen's `}\\n` / `]\\n` at the end of a JSON document).
- **Keywords vs identifiers (sql, priorities stripped).** lark's basic lexer lets a keyword literal win over `CNAME`;
  the other engines also take the identifier reading, so e.g. they allow EOS after `SELECT * FROM myTable WHERE`
  (`WHERE` as a table alias), which lark rejects.
- **Case-insensitive literals and Unicode.** lark's lexer is Python `re`, whose IGNORECASE matches `ı` (U+0131) to `i` and
  `ſ` (U+017F) to `s`; so lark parses `SELECT * FROM myınner join t ON a = b`, and our masks allow tokens starting with the
  bytes `\\xc4` / `\\xc5` where such a keyword may start.
- **Tokens inside forced text (copy_edit).** Where the grammar forces a literal (after `<copy` the rest of
  `<copy lines="`), llguidance allows only some of the tokens that spell a prefix of it (` lines` but not ` l`, ` line`,
  ` `); our engine allows every token whose bytes continue a legal text.
- **`(own %import)` rows** use the engine's bundled `common` definitions: lark's stock `ESCAPED_STRING` admits control
  characters that outlines' `common.lark` excludes."""


def _report(args, results, docsets, toks, inline_notes, load_before, load_after, elapsed) -> str:
    mib = lambda kib: f"{kib / 1024:,.0f}"
    # 1. compile / load
    rows = []
    for r in results:
        if r.cold is None and r.warm is not None:
            configs, n_rows = r.store if r.store else ("-", "-")
            rows.append((r.grammar, r.tokenizer, configs, f"{n_rows:,}", "not measured (--skip-cold)", "-", "-",
                         f"{r.warm['seconds']:.3f}", f"{mib(r.warm['peak_kib'])} ({mib(r.warm['base_kib'])}); "
                         f"+{mib(r.warm.get('rss_added_kib', 0))} MiB RSS, file {r.warm.get('file_bytes', 0) / 2**20:.1f} MiB",
                         "-", "-", f"{r.fill['seconds']:.2f}" if r.fill else "-"))
            continue
        if r.cold is None:
            configs, n_rows = r.store if r.store else ("-", "-")
            rows.append((r.grammar, r.tokenizer, configs, n_rows, *["-"] * 7,
                         f"error: {r.error}" if r.error else "not measured (--skip-compile-bench)"))
            continue
        llg = next((o for o in r.others if o.engine == "llguidance"), None)
        xgr = next((o for o in r.others if o.engine == "xgrammar"), None)
        rows.append((r.grammar, r.tokenizer, r.cold["n_configs"], f"{r.cold['n_rows']:,}", f"{r.cold['seconds']:.2f}",
                     f"{mib(r.cold['peak_kib'])} ({mib(r.cold['base_kib'])})", mib(r.cold["ru_maxrss_kib"]),
                     f"{r.warm['seconds']:.3f}" if r.warm else "-",
                     f"{mib(r.warm['peak_kib'])} ({mib(r.warm['base_kib'])}); +{mib(r.warm.get('rss_added_kib', 0))} MiB "
                     f"RSS, file {r.warm.get('file_bytes', 0) / 2**20:.1f} MiB" if r.warm else "-",
                     f"{1000 * llg.setup_s:.1f}{'*' if llg.label else ''}" if llg else "refused" if toks[r.tokenizer]["llg"] else "-",
                     f"{1000 * xgr.setup_s:.1f}{'*' if xgr.label else ''}" if xgr else "refused" if toks[r.tokenizer]["xgr"] else "-",
                     f"{r.fill['seconds']:.2f}" if r.fill else "-"))
    t1 = markdown_table(["grammar", "tokenizer", "lexer configs", "store rows (streamlined)", "cold compile s",
                         "cold peak RSS MiB (before compile)", "cold ru_maxrss MiB", "warm load s (ready to mask)", "warm peak RSS MiB (before load); RSS added by the grammar; its file",
                         "llguidance matcher ms", "xgrammar compile ms", "cache fill s"], rows)
    # 2. per-token mask time
    rows2 = []
    for r in results:
        if r.ours is None:
            continue
        o = _stats(r.ours.mask_ns)
        adv = _stats(r.ours.advance_ns)
        bo = _stats(r.ours.bool_ns)
        pc = np.asarray(r.ours.parser_calls or [0])
        pa = np.asarray(r.ours.advance_calls or [0])
        ds = docsets[r.grammar]
        rows2.append((r.grammar, r.tokenizer, f"{r.docs_used}/{len(ds.docs)} of {ds.candidates}", r.positions,
                      _fmt(o[0]), _fmt(o[1]), _fmt(o[2]), _fmt(o[3]), f"{_fmt(bo[0])} / {_fmt(bo[1])}",
                      _fmt(adv[0]), _fmt(adv[2]),
                      f"{pc.mean():.1f} / {int(pc.max())}", f"{pa.mean():.1f}"))
    t2 = markdown_table(["grammar", "tokenizer", "docs used/parsed of candidates", "positions",
                         "mask mean us", "p50", "p99", "max", "allowed_mask mean / p50 us", "advance mean us",
                         "advance p99",
                         "parser calls per mask mean / max", "parser calls per advance"], rows2)
    t2 += "\n\nSlowest mask per set (ours):\n\n" + "\n".join(
        f"- {r.grammar} x {r.tokenizer}: {r.ours.slowest[0] / 1000:,.0f} us at {r.ours.slowest[1]} position "
        f"{r.ours.slowest[2]}, after {r.ours.slowest[3]}, {r.ours.slowest[4]} parser calls"
        + (f", of which {r.ours.slowest[5] / 1000:,.0f} us in a garbage collection" if r.ours.slowest[5] else "")
        + f"; {r.ours.gc_positions} of the set's mask computations included a collection "
          f"({r.ours.gc_ns / 1e6:,.1f} ms in all)"
        for r in results if r.ours is not None and r.ours.slowest[1])
    # 2b. batches and where a mask's time goes
    rows_b = []
    for r in results:
        if not r.batch:
            continue
        b = r.batch
        ph = b["phases_us"]
        rows_b.append((r.grammar, r.tokenizer, b["batch"], b["threads"], f"{b['singles_us']:,.0f}",
                       f"{b['batch_us']:,.0f}", f"{b['ratio']:.2f}", *(f"{x:.1f}" for x in ph)))
    t_batch = "One `fill_next_token_bitmask_batch` call (GIL released, thread pool) vs the same masks as " \
          "single calls, mean over the rounds; and where one mask's time goes (native phases, us per mask, same " \
          "positions: replaying the labels completed beyond the committed parser, walking the row trie against " \
          "the parser, OR-ing the passing token sets into the bitmask, clearing special tokens and the EOS check)." \
          "\n\n" + markdown_table(["grammar", "tokenizer", "batch", "threads", "single calls us", "one batch call us",
                                   "batch / singles", "pending us", "trie walk us", "union us", "EOS + rest us"],
                                  rows_b)
    # 3. side by side
    rows3 = []
    for r in results:
        if r.ours is None:
            continue
        o = _stats(r.ours.mask_ns)
        for e in ENGINES[1:]:
            runs = [x for x in r.others if x.engine == e]
            if not runs:
                why = next((m for en, m in r.refusals if en.startswith(e)), "not run")
                why = f"refused: {_short(why, 120)}".replace("|", "\\|") if why != "not run" else why
                rows3.append((r.grammar, r.tokenizer, e, why,
                              "-", "-", "-", "-", "-", "-", "-", "-", "-"))
            for run_ in runs:
                rows3.append(_side_row(r, run_, o))
    t3 = markdown_table(["grammar", "tokenizer", "engine", "positions", "mask mean us", "p50", "p99", "max",
                         "advance mean us", "ours/it mean", "ours/it p50", "ours/it p99", "identical masks"], rows3)
    # refusals, rejections, disagreements
    refusals = [f"- {r.grammar} x {r.tokenizer}, {en}: `{_short(m, 300)}`" for r in results for en, m in r.refusals]
    rejections = [f"- {r.grammar} x {r.tokenizer}, ours: {x}" for r in results if r.ours for x in r.ours.rejections]
    other_rej = [f"- {r.grammar} x {r.tokenizer}, {o.engine}{o.label}: {x}" for r in results for o in r.others
                 for x in o.rejections[:10]]
    disagreements = []
    for r in results:
        for o in r.others:
            if o.added_diff:
                disagreements.append(
                    f"- {r.grammar} x {r.tokenizer} vs {o.engine}{o.label}, added tokens (compared apart: "
                    f"{', '.join(f'`{a}`' for a in r.added[:8])}{' ...' if len(r.added) > 8 else ''}; non-special, "
                    f"our vocabulary gives them their text as bytes): masks differ on them at {o.added_diff} positions; "
                    f"allowed by ours only: {o.added_only_ours:,} (token x position)")
            if o.compared and o.equal < o.compared:
                disagreements.append(
                    f"- {r.grammar} x {r.tokenizer} vs {o.engine}{o.label}: {o.compared - o.equal}/{o.compared} positions "
                    f"differ; tokens only ours allow: {o.only_ours:,}, only {o.engine} allows: {o.only_theirs:,}; "
                    f"EOS differs at {o.eos_diff} positions. First examples:\n"
                    + "\n".join(f"  - {_short(x, 400)}" for x in o.examples))
    docs_lines = []
    for g, ds in docsets.items():
        docs_lines.append(f"- **{g}**: {len(ds.docs)} of {ds.candidates} candidate documents parse with the grammar "
                          f"(lark, LALR, basic lexer){': ' + ', '.join(d.name for d in ds.docs) if len(ds.docs) <= 12 else ''}"
                          + ("; not parsed: " + "; ".join(_short(x, 160) for x in ds.rejected) if ds.rejected else ""))
    tok_lines = [f"- {n}: vocabulary {t['vocab'].size:,} ids (tokenizer {t['vocab'].tokenizer_size:,}), EOS {t['vocab'].eos_token_ids}"
                 + (f"; {'; '.join(t['notes'])}" if t["notes"] else "") for n, t in toks.items()]
    versions = ", ".join(f"{p} {_version(p)}" for p in ("llguidance", "xgrammar", "lark", "numpy", "outlines", "outlines-core"))
    parts = [
        "Our engine runs with its default, streamlined mask store (docs/streamlining.md): cold compile includes "
        "streamlining. Per grammar x tokenizer: cold compile (`cache=False`) and warm load (a private mask-store cache "
        "that holds the store), each in a fresh subprocess; then real documents teacher-forced through our `Matcher`, llguidance "
        "and xgrammar in lockstep. Only the mask computation is timed (`fill_next_token_bitmask` into a packed int32 "
        "bitmask, for all three engines); consuming the token (`advance` / `consume_token` / `accept_token`) is timed "
        "separately. Each document is tokenised by the HF tokenizer without special tokens; after the last token of a "
        "complete document the engine's EOS must be allowed (one more mask, counted in the positions). GC stays on. "
        f"Machine load average (1, 5, 15 min) at the start {tuple(round(x, 2) for x in load_before)}, at the end "
        f"{tuple(round(x, 2) for x in load_after)}; the study took {elapsed:.0f} s.",
        f"Versions: {versions}.",
        "## Documents\n\n" + "\n".join(docs_lines)
        + (f"\n\nTeacher-forced tokens capped at {args.max_tokens} per grammar x tokenizer (`--max-tokens`); a document "
           "cut by the cap gets no EOS check." if args.max_tokens is not None else ""),
        "## Tokenizers\n\n" + "\n".join(tok_lines),
        "## Compile and load\n\nPeak RSS is the subprocess's peak resident set (`VmHWM` of /proc/self/status): it "
        "includes the Python interpreter, the imports and the loaded vocabulary; in brackets the peak before "
        "`compile_grammar` was called, so the difference is what compiling (or loading) added. Not `ru_maxrss`: on Linux "
        "a child's `ru_maxrss` starts from its parent's RSS at fork/exec (here the study process with torch, "
        "transformers and the loaded grammars), so it overstates a small child; it is kept in the table for reference. "
        "llguidance has "
        "no ahead-of-time mask store: its column is the `LLMatcher` creation (grammar compile; the lexer is built "
        "lazily while masks are computed). xgrammar's column is `GrammarCompiler.compile_grammar` (its cache off). "
        "`*`: on the grammar with priorities stripped (see refusals). \"cache fill\": a first warm call that found no "
        "store in the cache folder and built and saved it.\n\n" + t1,
        "## Our engine: per-token mask time (microseconds)\n\n\"mask\": `fill_next_token_bitmask` (the form compared "
        "with the other engines). \"allowed_mask\": the bool form, timed right after it at the same positions (not "
        "part of the comparison; the difference is the cost of packing the bool mask into int32 words). Parser "
        "calls: `Matcher.parser_checks` added by one mask computation / by one `advance`.\n\n" + t2,
        "## Batches, and where a mask's time goes\n\n" + t_batch,
        "## Side by side on the same documents and tokens\n\n\"ours/it\": our statistic divided by the other "
        "engine's, both over the positions the other engine computed (> 1: we are slower). An engine that rejects "
        "a document's token stops on that document; \"budget out\": it was stopped when its summed mask time passed "
        f"`--engine-budget` ({args.engine_budget:g} s). \"identical masks\": positions where the two masks agree on every "
        "token that is neither special nor an added token, and on EOS (added tokens: see the disagreements).\n\n" + t3,
        "## Refusals\n\n" + ("\n".join(refusals) if refusals else "None.")
        + "\n\nGrammars with `%import` were given to llguidance and xgrammar with their imports inlined textually "
        "(see the module docstring): "
        + ("; ".join(f"{g}: {n}" for g, n in inline_notes.items()) if inline_notes else "none needed") + ". "
        "Where an engine refuses rule/terminal priorities it is also run on the grammar with the priorities stripped "
        "(`name.N:` -> `name:`). That does not change the language of the rules, but terminal priorities decide "
        "lexing collisions in lark, so such rows compare against a slightly different lexer. xgrammar is run through "
        "`xgrammar.Grammar.from_lark` (present in xgrammar 0.2.8). Rows marked `(own %import)` give the engine the "
        "original text, whose `%import common.X` it resolves with its own bundled definitions; those can differ from "
        "the `common.lark` lark loads (outlines' folder has its own `ESCAPED_STRING`), so that row is a slightly "
        "different grammar, shown because it changes the engines' speed.",
        "## Teacher-forced tokens our engine rejected\n\n" + ("\n".join(rejections) if rejections else
                                                            "None: every document token was in our mask and accepted by `advance`, and EOS was allowed at the end of every complete document."),
        "## Rejections by the other engines\n\n" + ("\n".join(other_rej) if other_rej else "None."),
        "## Mask disagreements with ours\n\n" + ("\n".join(disagreements) if disagreements else "None.")
        + "\n\n" + KNOWN_DIFFERENCES,
    ]
    return "\n\n".join(parts)


def _plot(results: list[PairResult], path: Path) -> Path | None:
    runs = [r for r in results if r.ours is not None and r.ours.mask_ns]
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(runs)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.6 * rows), squeeze=False)
    colors = {"ours": "tab:blue", "llguidance": "tab:orange", "xgrammar": "tab:green"}
    for ax, r in zip(axes.flat, runs):
        for run_ in [r.ours, *r.others]:
            a = np.sort(np.asarray(run_.mask_ns, dtype=np.float64) / 1000.0)
            if not len(a):
                continue
            ax.plot(a, np.arange(1, len(a) + 1) / len(a), label=f"{run_.engine}{run_.label} (n {len(a)}, p50 {np.median(a):.0f} us)",
                    color=colors.get(run_.engine), linestyle="--" if run_.label else "-")
        ax.set_xscale("log")
        ax.set_title(f"{r.grammar} x {r.tokenizer} ({r.positions} positions)", fontsize=10)
        ax.set_xlabel("mask time per token (us, log)")
        ax.set_ylabel("fraction of positions")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
