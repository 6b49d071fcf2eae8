"""Grammar -> compiled grammar: load with lark, compile terminals, build (or load from
the cache) the mask store for a vocabulary."""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import hashlib
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import lark

from ..errors import GrammarCompileError, GrammarError, SchemaError
from ..grammars import grammar_source
from ..limits import DEFAULT_LIMITS, Limits, check_deadline, check_limit, enforcing
from .compiled_grammar import CompiledGrammar
from .compile_profile import COLD_PHASES, CompileProfile
from .store.flat_grammar import FlatFileError, FlatGrammar, lazy_flat, lazy_lexer_arrays
from .frontend.grammar_checks import check_language, missing_start_error, produced_terminals
from .frontend.grammar_load import LoadedGrammar, load_rules, postlexer
from .frontend.lalr import parse_tables, parse_tables_of
from .frontend.parser_loops import check_parser_loops
from .store.grammar_analysis import GrammarAnalysis, LRGame
from .store.lexer import ConfigTable, Lexer, LexerSpec
from .store.mask_store import MaskStore
from .store.native_store import build_mask_store
from .frontend.parse_tables import IndentTracker, ObjectGuards, ParseTables
from .store.streamline import streamline as streamline_store
from .store.lexer import lexer_spec_from_lark
from .vocabulary import Vocabulary

__all__ = ["load_lark", "compile_grammar", "compile_json_schema", "validate_grammar", "wait_for_cache_writes",
           "grammar_fingerprint", "cache_dir", "source_key", "cached_path"]

FORMAT_VERSION = "3"  # bump whenever what a store holds changes
STREAMLINE_VERSION = "1"  # bump whenever what streamlining produces changes
FLAT_VERSION = "5"  # bump whenever the flat arrays (flat_grammar.py) change
LAZY_PHASES = ("lark load", "terminal DFAs", "parse tables", "lexer configurations", "flat arrays")


def show_progress(progress: bool | None) -> bool:
    """Whether to draw progress bars: as asked, else (None) only when stderr is a terminal."""
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def cache_dir() -> Path:
    """``$CAD_OUTLINES_CACHE`` or ``~/.cache/cad_outlines``."""
    return Path(os.environ.get("CAD_OUTLINES_CACHE") or Path.home() / ".cache" / "cad_outlines")


def load_lark(grammar: str | Path, *, start: str | None = None, import_paths=(), postlex="auto") -> lark.Lark:
    """The grammar loaded by lark itself (LALR, basic lexer), `%import`s resolved.
    `grammar`: a shipped grammar's name, a .lark file or grammar text
    (:func:`~cad_outlines.grammars.grammar_source`); `start` defaults to the rule the
    grammar names, else lark's ``start``; a missing start rule raises
    :class:`GrammarCompileError` listing the rules that could start."""
    src = grammar_source(grammar)
    text, start = src.text, start or src.start
    options = dict(parser="lalr", lexer="basic", import_paths=[*src.import_paths, *map(str, import_paths)])
    if start:
        options["start"] = start
    pl = postlexer(text, postlex)
    if pl is not None:
        options["postlex"] = pl
    try:
        return lark.Lark(text, **options)
    except lark.exceptions.GrammarError as e:
        error = missing_start_error(text, options["import_paths"], start)
        if error is None:
            raise
        raise error from e


def grammar_fingerprint(lk: lark.Lark | LoadedGrammar) -> str:
    """Content hash of what lark loaded: terminals, rules, ignores, start, postlexer."""
    h = hashlib.sha256()
    for t in sorted(lk.terminals, key=lambda t: t.name):
        h.update(repr((t.name, t.pattern.type, t.pattern.value, sorted(t.pattern.flags), t.priority)).encode())
    for r in lk.rules:
        h.update(repr((r.origin.name, [s.name for s in r.expansion], r.options.priority)).encode())
    h.update(repr((sorted(lk.ignore_tokens), lk.options.start, type(lk.options.postlex).__name__)).encode())
    return h.hexdigest()


def _library_version() -> str:
    from .._version import __version__

    return f"{__version__}/{FORMAT_VERSION}"


def source_key(grammar: str | Path, vocab: Vocabulary, *, start: str | None = None, import_paths=(),
               postlex="auto", streamline: bool = True) -> str:
    """Cache key of a compiled grammar computed WITHOUT loading it: the grammar text, the
    ``.lark`` files it may import (its folder and `import_paths`), start, postlexer, lark's
    version, the vocabulary's content hash and this library's format versions."""
    src = grammar_source(grammar)
    h = hashlib.sha256()
    h.update(src.text.encode())
    for folder in [*src.import_paths, *map(str, import_paths)]:
        for f in sorted(Path(folder).glob("*.lark")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    pl = postlex if isinstance(postlex, (str, type(None))) else type(postlex).__qualname__
    h.update(repr((start, pl, streamline, lark.__version__, vocab.content_hash, _library_version(),
                   STREAMLINE_VERSION, FLAT_VERSION)).encode())
    return h.hexdigest()[:32]


def cached_path(grammar: str | Path, vocab: Vocabulary, *, start: str | None = None, import_paths=(),
                postlex="auto", streamline: bool = True, lazy: bool = False,
                cache: bool | str | Path = True) -> Path | None:
    """The file :func:`compile_grammar` keeps this grammar in for `vocab` (None when
    `cache` is False), computed without loading the grammar: whether it exists says
    whether a compile would be a load."""
    if cache is False:
        return None
    folder = cache_dir() if cache is True else Path(cache)
    key = source_key(grammar, vocab, start=start, import_paths=import_paths, postlex=postlex,
                     streamline=streamline and not lazy)
    return folder / f"{'lazy' if lazy else 'flat'}-{key}.bin"


def compile_grammar(grammar: str | Path, vocab: Vocabulary, *, start: str | None = None, import_paths=(),
                    postlex="auto", cache: bool | str | Path = True, progress: bool | None = None,
                    streamline: bool = True, lazy: bool = False, profile: CompileProfile | None = None,
                    limits: Limits | None = None) -> CompiledGrammar:
    """Compile a Lark grammar for a vocabulary.

    `grammar` is a shipped grammar's name (``"json"``, ``"python"``, ``"sql"``,
    ``"copy_edit"``), a path to a .lark file, or grammar text; `start` defaults to the
    grammar's own (``// cad_outlines: start=NAME``), else ``start``. The result is cached on disk
    (``cache_dir()`` or the folder given as `cache`; `cache=False` always builds) as one
    flat-array file keyed by :func:`source_key`; a warm load memory-maps it without
    running lark. A cached file that is truncated, corrupt, of another version or for
    another vocabulary is rebuilt, never trusted. With `streamline` (the default) the
    store is the one rewritten by grammar analysis (:mod:`.streamline`; same masks,
    fewer parser questions). With `lazy`, no store is built here: the native core builds
    each lexer configuration's rows the first time a mask needs them (same masks; the
    rows are not streamlined), so a new grammar is usable after its grammar-only phases
    (lark, terminal automata, parse tables, the lexer's byte automaton). `profile` (a
    :class:`~.compile_profile.CompileProfile`)
    gets the time and peak memory of every phase of a build. `progress`: bars on stderr
    (None, the default: only when stderr is a terminal). Raises
    :class:`~cad_outlines.engine.frontend.terminals.GrammarCompileError` naming the terminal for a
    construct that cannot be compiled or never matches, and naming the rule for a missing
    start rule or an empty language. `limits` (:class:`~cad_outlines.limits.Limits`, default
    ``Limits()``) bounds what the compile may cost (grammar size, literals, terminals, DFA states, lexer
    configurations, store rows, cache file size, wall time): exceeding one raises
    :class:`~cad_outlines.errors.ResourceLimitError` naming it; its decode-time fields bound every call of
    the grammar's matchers (:class:`~cad_outlines.engine.matcher.Matcher`).
    """
    with enforcing(limits):
        compiled = _compile_grammar(grammar, vocab, start=start, import_paths=import_paths, postlex=postlex,
                                    cache=cache, progress=show_progress(progress), streamline=streamline, lazy=lazy,
                                    profile=profile)
    compiled.limits = limits if limits is not None else DEFAULT_LIMITS
    return compiled


def _compile_grammar(grammar: str | Path, vocab: Vocabulary, *, start: str | None, import_paths, postlex,
                     cache: bool | str | Path, progress: bool, streamline: bool, lazy: bool,
                     profile: CompileProfile | None) -> CompiledGrammar:
    fpath = cached_path(grammar, vocab, lazy=lazy, cache=cache, start=start, import_paths=import_paths,
                        postlex=postlex, streamline=streamline)

    def phases(prof: CompileProfile, lazy: bool = False) -> _Phases:
        lk, start_, spec, tables, indenter = _grammar_phases(grammar, start, import_paths, postlex, prof)
        return _Phases(lk, start_, spec, tables, indenter, grammar_fingerprint(lk))

    return _compile(fpath, vocab, phases, cache=cache, progress=progress, streamline=streamline, lazy=lazy,
                    profile=profile)


@dataclass
class _Phases:
    """What a front end hands the later stages: the rules (for the analyses), the start rule, the
    lexer's spec, the parse tables, the indenter (or None) and the grammar's content hash. A front
    end asked for a lazy grammar (``phases(profile, lazy=True)``) may hand the lexer's flat arrays
    instead of its spec (``lexer``: :func:`~.store.flat_grammar.dfa_automaton_arrays`)."""

    lk: object
    start: str
    spec: LexerSpec | None
    tables: object
    indenter: IndentTracker | None
    fingerprint: str
    lexer: tuple[dict, dict] | None = None


def _compile(fpath: Path | None, vocab: Vocabulary, phases, *, cache: bool | str | Path, progress: bool,
             streamline: bool, lazy: bool, profile: CompileProfile | None) -> CompiledGrammar:
    """Load the cached flat file at `fpath`, or build it: `phases(profile)` runs the front end
    (:class:`_Phases`), then the lazy lexer arrays or the eager store (streamlined or not)."""
    folder = None if cache is False else (cache_dir() if cache is True else Path(cache))

    def objects(prof: CompileProfile | None = None) -> CompiledGrammar:
        return _compile_objects(vocab, phases, folder=folder, progress=progress, profile=prof, streamline=streamline)

    def reference():  # the Python objects of the eager build (analyses, reference matcher)
        return objects(CompileProfile())._reference()

    prof = profile if profile is not None else CompileProfile(memory=False)
    if fpath is not None:
        _wait_for_save(fpath)
    if fpath is not None and fpath.is_file():
        try:
            with prof.phase("load flat arrays"):
                flat = FlatGrammar.load(fpath)
            if flat.meta.get("vocab_hash") != vocab.content_hash:
                raise FlatFileError(f"{fpath}: built for another vocabulary")
            return CompiledGrammar(vocab, grammar_hash=flat.meta["grammar_hash"], streamlined=streamline and not lazy,
                                   flat=flat, reference_loader=reference)
        except (FlatFileError, KeyError) as e:
            warnings.warn(f"rebuilding the compiled grammar: {e}", stacklevel=2)
            prof.phases.clear()
    if lazy:
        prof.start(progress, planned=len(LAZY_PHASES))
        try:
            ph, lexer = _compile_lazy(vocab, phases, profile=prof)
            with prof.phase("flat arrays"):
                flat = lazy_flat(ph.tables, ph.indenter, vocab, lexer)
                flat.meta.update(vocab_hash=vocab.content_hash, grammar_hash=ph.fingerprint)
            check_limit("max_cache_file_bytes", flat.nbytes, "compiled grammar file")
            if fpath is not None:  # the grammar is usable now; its cache file is written beside
                _save_in_background(flat, fpath)
        finally:
            prof.finish()
        return CompiledGrammar(vocab, grammar_hash=flat.meta["grammar_hash"], streamlined=False, flat=flat,
                               reference_loader=reference)
    prof.start(progress)
    try:
        compiled = objects(prof)
        with prof.phase("flat arrays"):
            flat = compiled.flat
            flat.meta.update(vocab_hash=vocab.content_hash, grammar_hash=compiled.grammar_hash)
            check_limit("max_cache_file_bytes", flat.nbytes, "compiled grammar file")
            if fpath is not None:
                flat.save(fpath)
    finally:
        prof.finish()  # the bar is closed also when the grammar is refused
    return compiled


_SAVING: dict[Path, threading.Thread] = {}  # lazy files being written, by path
_SAVING_LOCK = threading.Lock()


def _save_in_background(flat: FlatGrammar, path: Path) -> None:
    """Write a lazy grammar's file on a (non-daemon) thread: the first mask need not wait
    for the disk. A compile of the same file waits for it (:func:`_wait_for_save`); the
    write is atomic, so another process sees the whole file or none."""
    def save() -> None:
        _lowest_priority()  # the first mask's vocabulary walk gets the cores first
        time.sleep(0)  # hand the GIL straight back: the caller goes on to its first mask
        try:
            flat.save(path)
        except OSError as e:
            warnings.warn(f"could not cache the compiled grammar at {path}: {e}", stacklevel=1)

    t = threading.Thread(target=save, name="cad-outlines-save", daemon=False)
    with _SAVING_LOCK:
        _SAVING[path] = t
    t.start()


def _lowest_priority() -> None:
    """Run the calling thread at the lowest CPU priority where the OS can (Linux: a
    thread's own nice value, set through its thread id); elsewhere nothing changes."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def wait_for_cache_writes() -> None:
    """Block until every lazy grammar file being written by this process is on disk."""
    with _SAVING_LOCK:
        pending = list(_SAVING)
    for path in pending:
        _wait_for_save(path)


def _wait_for_save(path: Path) -> None:
    with _SAVING_LOCK:
        t = _SAVING.pop(path, None)
    if t is not None:
        t.join()


def validate_grammar(grammar: str | Path, *, start: str | None = None, import_paths=(), postlex="auto") -> None:
    """Every check a compile makes before any vocabulary work (lark reads the grammar, every terminal
    compiles, the language is not empty, the LALR tables have no conflict and no reachable cycle of
    reductions), under the active limits: raises what :func:`compile_grammar` would."""
    _grammar_phases(grammar, start, import_paths, postlex, CompileProfile())


def _grammar_phases(grammar: str | Path, start: str | None, import_paths, postlex, prof: CompileProfile):
    """lark's grammar reader, terminal automata (checked), parse tables (native LALR):
    (loaded grammar, start, spec, tables, indenter)."""
    with prof.phase("lark load"):
        lk = load_rules(grammar, start=start, import_paths=import_paths, postlex=postlex)
        start = lk.options.start[0]
    try:
        with prof.phase("terminal DFAs"):
            spec = lexer_spec_from_lark(lk)
            check_language(lk, spec, start)
        with prof.phase("parse tables"):
            tables = parse_tables(lk.rules, start)
            check_parser_loops(tables, produced_terminals(lk, spec))
    except GrammarError as e:
        raise (e if lk.name == "grammar" else e.in_file(lk.name)) from e.__cause__
    pl = lk.options.postlex
    return lk, start, spec, tables, IndentTracker.from_postlex(pl) if pl is not None else None


def _compile_lazy(vocab: Vocabulary, phases, *, profile: CompileProfile) -> tuple[_Phases, tuple[dict, dict]]:
    """The grammar-only phases: (the front end's :class:`_Phases`, the lexer's arrays with its byte
    automaton), for :func:`~.flat_grammar.lazy_flat`."""
    prof = profile
    ph = phases(prof, lazy=True)
    lexer = ph.lexer
    if lexer is None:
        with prof.phase("lexer configurations"):
            g = CompiledGrammar(vocab, Lexer(ph.spec), None, ph.tables, ph.indenter, ph.fingerprint, streamlined=False)
            lexer = lazy_lexer_arrays(g)
    check_limit("max_lexer_configs", len(lexer[0]["c_owner"]), "lexer")
    for p in prof.phases:
        if p.name == "lexer configurations":
            p.note = f"{len(lexer[0]['c_owner']):,} configs, {len(lexer[0]['a_nxt']):,} byte edges"
    return ph, lexer


def _compile_objects(vocab: Vocabulary, phases, *, folder: Path | None, progress: bool, streamline: bool,
                     profile: CompileProfile) -> CompiledGrammar:
    """The Python objects: the front end's phases, mask store (cached as .npz),
    streamlining; each phase recorded in `profile` (started by the caller)."""
    prof = profile
    ph = phases(prof)
    lk, start, spec, tables, indenter, fingerprint = ph.lk, ph.start, ph.spec, ph.tables, ph.indenter, ph.fingerprint
    lexer = Lexer(spec)
    if tables.guards is not None:  # the rules alone over-approximate: no analyses of them
        streamline = False
    key = hashlib.sha256(f"{fingerprint}:{vocab.content_hash}:{_library_version()}".encode()).hexdigest()[:32]
    path = folder / f"store-{key}.npz" if folder else None
    spath = folder / f"streamlined-{key}-{STREAMLINE_VERSION}.npz" if folder and streamline else None
    if spath is not None and spath.is_file():  # the streamlined store alone is enough
        prof.skip(len(COLD_PHASES) - 5)  # all but the 3 above, this load and "flat arrays"
        with prof.phase("load streamlined store"):
            store = _load(spath, lexer)
    else:
        if path is not None and path.is_file():
            prof.skip(2)  # the store's three phases, but this load
            with prof.phase("load store"):
                store = _load(path, lexer)
        else:
            update, close = _progress_bar() if progress else (None, None)
            timings: dict = {}
            unstored = CompiledGrammar(vocab, lexer, None, tables, indenter, fingerprint)
            store = build_mask_store(unstored, progress=update, timings=timings)
            if close is not None:
                close()
            for name in ("lexer configurations", "token-level index", "store rows"):
                wall, cpu = timings.get(name, (0.0, 0.0))
                prof.add(name, wall, cpu, f"{len(store.configs):,} configs, {store.n_rows:,} rows"
                         if name == "store rows" else "")
            if path is not None and not streamline:  # a streamlined compile keeps only what it uses
                with prof.phase("save store"):
                    _save(store, path)
        if streamline:
            with prof.phase("grammar analysis"):
                analysis = GrammarAnalysis.from_lark(lk, start)
                lr = LRGame(tables)
            say = prof.step_printer(_step_printer() if progress else None)
            say = _with_deadline(say)
            result = streamline_store(store, lexer, analysis, progress=say, lr=lr, consume=True)
            prof.add("streamline: merge sets", time.perf_counter() - say.mark[0], time.process_time() - say.mark[1],
                     f"{result.store.n_rows:,} rows, {len(result.store.set_ids):,} sets")
            store = result.store
            if spath is not None:
                with prof.phase("save streamlined store"):
                    _save(store, spath)
    return CompiledGrammar(vocab, lexer, store, tables, indenter, fingerprint, streamlined=streamline)


def _with_deadline(say):
    """A streamlining progress callback that also stops the compile past its deadline."""
    def wrapped(msg: str) -> None:
        check_deadline("streamlining")
        say(msg)

    wrapped.mark = say.mark  # the step printer's clock, read after streamlining
    return wrapped


def _load(path: Path, lexer: Lexer) -> MaskStore:
    """A cached store, with the lexer's configuration table rebuilt from it (ids match)."""
    store = MaskStore.load(path)
    table = ConfigTable()
    for c in store.configs:
        table.id(c)
    lexer.use_table(table)
    return store


def _save(store: MaskStore, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    store.save(tmp)
    os.replace(tmp, path)


def _step_printer():
    from tqdm.auto import tqdm

    bar = tqdm(desc="streamlining", total=4, unit="step", leave=False)

    def say(msg: str) -> None:
        if msg.endswith("rows"):
            bar.update(1)
            bar.set_postfix_str(msg)
            if bar.n >= bar.total:
                bar.close()

    return say


def _progress_bar():
    """(update, close) for the store's bar: configurations indexed, out of the lexer's
    byte-level configurations (known before the walk, so the total never moves; a
    configuration no whole token reaches is never indexed, and the bar closes short)."""
    from tqdm.auto import tqdm

    bars: list = []
    started = time.perf_counter()

    def update(done: int, total: int) -> None:
        if not bars:  # opened once the total is known
            bars.append(tqdm(desc="lexer configurations indexed", unit="config", total=total, leave=False,
                             mininterval=0.5))
        bars[0].update(done - bars[0].n)

    def close() -> None:
        if bars:
            bars[0].close()
            bars[0].write(f"mask store: {bars[0].n} lexer configurations in {time.perf_counter() - started:.1f}s")

    return update, close


_SCHEMAS: dict[str, CompiledGrammar] = {}  # in-process: content key -> compiled (most recent last)
_SCHEMAS_LOCK = threading.Lock()
_SCHEMAS_KEPT = 256
SCHEMA_VERSION = "9"  # bump whenever the JSON Schema front end's grammar for a schema changes


def load_schema(schema) -> object:
    """A JSON Schema given as a dict/bool, its JSON text, or a ``.json`` file (path or Path)."""
    import json

    if isinstance(schema, Path) or (isinstance(schema, str) and schema.endswith(".json") and "\n" not in schema
                                    and Path(schema).is_file()):
        schema = Path(schema).read_text(encoding="utf-8")
    if isinstance(schema, str):
        check_limit("max_grammar_bytes", len(schema.encode("utf-8", "surrogatepass")), "JSON Schema")
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise GrammarError(f"the schema is not valid JSON: {e}") from e
    if not isinstance(schema, (dict, bool)):
        raise GrammarError(f"a JSON Schema is an object or a boolean, not {type(schema).__name__}")
    check_limit("max_schema_depth", _depth(schema), "JSON Schema nesting")
    return schema


def _depth(x) -> int:
    """How deeply objects and arrays nest in a JSON value (iteratively: a hostile one is deep)."""
    deepest, todo = 0, [(x, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            deepest = max(deepest, d)
            todo.extend((c, d + 1) for c in v.values())
        elif isinstance(v, list):
            deepest = max(deepest, d)
            todo.extend((c, d + 1) for c in v)
    return deepest


def _schema_tables(sg) -> ParseTables:
    """A JSON Schema grammar's parse tables (an unresolved LALR conflict is an "anyOf" SchemaError or a
    GrammarCompileError), with its object guards."""
    tables = parse_tables_of(sg.rule_list, {n for n, _ in sg.terminals}, sg.start)
    if tables.shift_reduce:
        raise SchemaError("anyOf", "", f"the schema's alternatives overlap in a way the LALR(1) parser "
                          f"cannot decide ({tables.shift_reduce} shift/reduce conflicts)")
    if sg.guards:  # objects whose required names come in any order (ObjectGuards)
        tables.guards = ObjectGuards("LBRACE", "RBRACE", sg.guards, sg.checks)
    return tables


@contextlib.contextmanager
def _no_cyclic_gc():
    """The cyclic garbage collector paused (as `timeit` does) while a schema compiles: its allocations
    would otherwise start full collections of the whole heap (a server's is large), a few milliseconds
    each, for a compile that makes little cyclic garbage. Nested and threaded uses restore it once."""
    with _GC_LOCK:
        _GC_PAUSED[0] += 1
        if _GC_PAUSED[0] == 1:
            _GC_PAUSED[1] = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSED[0] -= 1
            if _GC_PAUSED[0] == 0 and _GC_PAUSED[1]:
                gc.enable()


_GC_LOCK = threading.Lock()
_GC_PAUSED = [0, True]  # compiles under way, whether the collector was enabled before the first


def compile_json_schema(schema, vocab: Vocabulary, *, whitespace: str = "outlines", coerce_one_of: bool = False,
                        property_order: str = "declared", lazy: bool = True, cache: bool | str | Path = True,
                        progress: bool | None = None, streamline: bool = True, profile: CompileProfile | None = None,
                        limits: Limits | None = None) -> CompiledGrammar:
    """Compile a JSON Schema (a dict, its JSON text, or a ``.json`` file) for a vocabulary.

    The schema becomes a grammar for this engine (:mod:`.frontend.json_schema`): one rule per
    sub-schema, exact terminals for strings, numbers and keys. Options:

    - `whitespace`: ``"outlines"`` (default: an optional space around ``{ } [ ] , :``, as Outlines),
      ``"flexible"`` (any JSON whitespace there, as llguidance), ``"compact"`` (none), or a regex
      matched at each of those places; never before or after the whole value;
    - `property_order`: ``"declared"`` (default: an object's declared ``properties`` in schema
      order, as Outlines and llguidance, then additional or pattern properties in any order) or
      ``"any"`` (keys in any order; a key may repeat, each value checked, as JSON parsers keep the
      last; required names are tracked in 2**r parser states, so an object past the schema's budget of
      moves (docs/json_schema.md) keeps its declared order, with a ``SchemaOrderWarning``);
    - `coerce_one_of`: treat a ``oneOf`` whose branches may overlap as ``anyOf`` (else refused);
    - `lazy` (default True): rows built on first use (:func:`compile_grammar`'s ``lazy``); False
      builds and streamlines the whole store.

    Compiled grammars are kept in process and on disk (`cache`), keyed by the schema's JSON (in its
    own key order, which decides the property order), the options, the vocabulary and the library's versions. A keyword that cannot be honoured
    raises :class:`~cad_outlines.errors.SchemaError` naming it and its JSON pointer; `limits` bounds
    the compile as for :func:`compile_grammar` (:class:`~cad_outlines.errors.ResourceLimitError`).
    """
    import json

    from .frontend.json_schema import build_grammar

    with enforcing(limits), _no_cyclic_gc():
        schema = load_schema(schema)
        try:
            text = json.dumps(schema, ensure_ascii=False)  # key order kept: properties are written in schema order
        except RecursionError:  # nesting past Python's recursion limit (max_schema_depth lifted)
            raise SchemaError("schema", "", "it nests too deeply to compile (Python's recursion limit of "
                              f"{sys.getrecursionlimit()} was reached reading it)") from None
        check_limit("max_grammar_bytes", len(text.encode("utf-8", "surrogatepass")), "JSON Schema")
        h = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
        h.update(repr((whitespace, coerce_one_of, property_order, streamline and not lazy, vocab.content_hash,
                       _library_version(), SCHEMA_VERSION, STREAMLINE_VERSION, FLAT_VERSION)).encode())
        key = h.hexdigest()[:32]
        mkey = f"{key}:{'lazy' if lazy else 'eager'}"
        with _SCHEMAS_LOCK:
            got = _SCHEMAS.pop(mkey, None)
            if got is not None:
                _SCHEMAS[mkey] = got
                want = limits if limits is not None else DEFAULT_LIMITS
                if got.limits != want:  # another caller's limits: a handle of its own, the same core
                    got.native  # built before the copy, so every handle shares it (and the rows it builds)
                    got = copy.copy(got)
                    got.limits = want
                return got
        folder = None if cache is False else (cache_dir() if cache is True else Path(cache))
        fpath = None if folder is None else folder / f"{'lazy' if lazy else 'flat'}-schema-{key}.bin"

        def phases(prof: CompileProfile, lazy: bool = False) -> _Phases:
            from .frontend.grammar_load import LoadedGrammar, LoadOptions
            from .store.flat_grammar import dfa_automaton_arrays
            from .store.lexer import lexer_spec_from_dfas

            build = functools.partial(build_grammar, schema, whitespace=whitespace, coerce_one_of=coerce_one_of,
                                      property_order=property_order)
            def built(**options) -> tuple:  # the schema's rules, written directly, and their warnings
                with prof.phase("lark load"), warnings.catch_warnings(record=True) as warned:
                    warnings.simplefilter("always")
                    return build(**options), warned

            sg, warned = built()
            try:
                with prof.phase("parse tables"):
                    tables = _schema_tables(sg)
            except (SchemaError, GrammarCompileError):
                if not sg.guards:
                    raise
                # a guarded object's rules admit more than it, so an alternative beside it may overlap it
                # (LALR conflicts): the schema is built again without guards (its warnings, not the first's)
                sg, warned = built(guards=False)
                with prof.phase("parse tables"):
                    tables = _schema_tables(sg)
            for w in warned:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            spec = lexer = None
            if lazy:  # the lexer's arrays and byte automaton straight from the terminal DFAs
                with prof.phase("lexer configurations"):
                    lexer = dfa_automaton_arrays(sg.terminals, sg.groups)
            else:
                with prof.phase("terminal DFAs"):
                    spec = lexer_spec_from_dfas(sg.terminals, sg.groups)
            lk = None
            if not lazy:  # the rules as lark loads them, for the eager store's analyses
                names = [type("T", (), {"name": n})() for n, _ in sg.terminals]
                lk = LoadedGrammar(names, sg.rules, [], LoadOptions([sg.start]), None, text, "schema")
            return _Phases(lk, sg.start, spec, tables, None, key, lexer)

        try:
            compiled = _compile(fpath, vocab, phases, cache=cache, progress=show_progress(progress),
                                streamline=streamline and not lazy, lazy=lazy, profile=profile)
        except GrammarCompileError as e:
            if isinstance(e, SchemaError) or "collision" not in str(e):
                raise
            raise SchemaError("anyOf", "", "the schema's alternatives overlap in a way the LALR(1) parser cannot "
                              f"decide: {str(e).splitlines()[0]}") from e
        compiled.limits = limits if limits is not None else DEFAULT_LIMITS  # its matchers' decode-time limits
        with _SCHEMAS_LOCK:
            _SCHEMAS[mkey] = compiled
            while len(_SCHEMAS) > _SCHEMAS_KEPT:
                _SCHEMAS.pop(next(iter(_SCHEMAS)))
        return compiled
