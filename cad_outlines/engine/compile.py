"""Grammar -> compiled grammar: load with lark, compile terminals, build (or load from
the cache) the mask store for a vocabulary."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import lark

from .compiled import CompiledGrammar
from .compile_profile import COLD_PHASES, CompileProfile
from .grammar_analysis import GrammarAnalysis, LRGame
from .lexer import ConfigTable, Lexer
from .lexer_index import TokenBytes
from .mask_store import MaskStore, build_mask_store
from .parser import IndentTracker, ParseTables
from .streamline import streamline as streamline_store
from .terminals import lexer_spec_from_lark
from .vocabulary import Vocabulary

__all__ = ["load_lark", "compile_grammar", "grammar_fingerprint", "cache_dir"]

FORMAT_VERSION = "2"  # bump whenever what a store holds changes
STREAMLINE_VERSION = "1"  # bump whenever what streamlining produces changes


def cache_dir() -> Path:
    """``$CAD_OUTLINES_CACHE`` or ``~/.cache/cad_outlines``."""
    return Path(os.environ.get("CAD_OUTLINES_CACHE") or Path.home() / ".cache" / "cad_outlines")


def _read_grammar(grammar: str | Path) -> tuple[str, list[str]]:
    """(text, import paths): a path (str ending in .lark or Path) is read and its folder
    is added to the import paths; anything else is grammar text."""
    if isinstance(grammar, Path) or (isinstance(grammar, str) and grammar.endswith(".lark") and "\n" not in grammar):
        path = Path(grammar)
        return path.read_text(encoding="utf-8"), [str(path.resolve().parent)]
    return str(grammar), []


def _postlexer(text: str, postlex):
    if postlex == "auto":
        declares = "%declare" in text and "_INDENT" in text and "_DEDENT" in text
        postlex = "python" if declares else None
    if postlex == "python":
        from lark.indenter import PythonIndenter

        return PythonIndenter()
    return postlex


def load_lark(grammar: str | Path, *, start: str | None = None, import_paths=(), postlex="auto") -> lark.Lark:
    """The grammar loaded by lark itself (LALR, basic lexer), `%import`s resolved."""
    text, paths = _read_grammar(grammar)
    options = dict(parser="lalr", lexer="basic", import_paths=[*paths, *map(str, import_paths)])
    if start:
        options["start"] = start
    pl = _postlexer(text, postlex)
    if pl is not None:
        options["postlex"] = pl
    return lark.Lark(text, **options)


def grammar_fingerprint(lk: lark.Lark) -> str:
    """Content hash of what lark loaded: terminals, rules, ignores, start, postlexer."""
    h = hashlib.sha256()
    for t in sorted(lk.terminals, key=lambda t: t.name):
        h.update(repr((t.name, t.pattern.type, t.pattern.value, sorted(t.pattern.flags), t.priority)).encode())
    for r in lk.rules:
        h.update(repr((r.origin.name, [s.name for s in r.expansion], r.options.priority)).encode())
    h.update(repr((sorted(lk.ignore_tokens), lk.options.start, type(lk.options.postlex).__name__)).encode())
    return h.hexdigest()


def _library_version() -> str:
    from .. import __version__

    return f"{__version__}/{FORMAT_VERSION}"


def compile_grammar(grammar: str | Path, vocab: Vocabulary, *, start: str | None = None, import_paths=(),
                    postlex="auto", cache: bool | str | Path = True, progress: bool = True,
                    streamline: bool = True, profile: CompileProfile | None = None) -> CompiledGrammar:
    """Compile a Lark grammar for a vocabulary.

    `grammar` is grammar text or a path to a .lark file. The mask store is cached on disk
    (``cache_dir()`` or the folder given as `cache`), keyed by the grammar's content,
    the vocabulary's content hash and the library version; `cache=False` always builds.
    With `streamline` (the default) the matcher uses the store rewritten by grammar
    analysis (:mod:`.streamline`; same masks, fewer parser questions), cached the same
    way. `profile` (a :class:`~.compile_profile.CompileProfile`) gets the time and peak
    memory of every phase. Raises :class:`~cad_outlines.engine.terminals.GrammarCompileError`
    naming the terminal for a construct that cannot be compiled.
    """
    prof = profile if profile is not None else CompileProfile()
    prof.start(progress)
    with prof.phase("lark load"):
        lk = load_lark(grammar, start=start, import_paths=import_paths, postlex=postlex)
    with prof.phase("terminal DFAs"):
        spec = lexer_spec_from_lark(lk)
        lexer = Lexer(spec)
    with prof.phase("parse tables"):
        tables = ParseTables(lk, start)
    pl = lk.options.postlex
    indenter = IndentTracker.from_postlex(pl) if pl is not None else None
    fingerprint = grammar_fingerprint(lk)
    key = hashlib.sha256(f"{fingerprint}:{vocab.content_hash}:{_library_version()}".encode()).hexdigest()[:32]
    folder = None if cache is False else (cache_dir() if cache is True else Path(cache))
    path = folder / f"store-{key}.npz" if folder else None
    spath = folder / f"streamlined-{key}-{STREAMLINE_VERSION}.npz" if folder and streamline else None
    if spath is not None and spath.is_file():  # the streamlined store alone is enough
        prof.skip(len(COLD_PHASES) - 4)
        with prof.phase("load streamlined store"):
            store = _load(spath, lexer)
    else:
        if path is not None and path.is_file():
            prof.skip(4)
            with prof.phase("load store"):
                store = _load(path, lexer)
        else:
            with prof.phase("token bytes"):
                tokens = TokenBytes.from_bytes(vocab.token_bytes, vocab.special_ids)
            update, close = _progress_bar() if progress else (None, None)
            timings: dict = {}
            store = build_mask_store(lexer, tokens, vocab.size, progress=update, timings=timings)
            if close is not None:
                close()
            for name in ("lexer configurations", "token-level index", "store rows"):
                wall, cpu = timings.get(name, (0.0, 0.0))
                prof.add(name, wall, cpu, f"{len(store.configs):,} configs, {store.n_rows:,} rows"
                         if name == "store rows" else "")
            if path is not None:
                with prof.phase("save store"):
                    _save(store, path)
            else:
                prof.skip(1)
        if streamline:
            with prof.phase("grammar analysis"):
                analysis = GrammarAnalysis.from_lark(lk, start)
                lr = LRGame(tables)
            say = prof.step_printer(_step_printer() if progress else None)
            result = streamline_store(store, lexer, analysis, progress=say, lr=lr, consume=True)
            prof.add("streamline: merge sets", time.perf_counter() - say.mark[0], time.process_time() - say.mark[1],
                     f"{result.store.n_rows:,} rows, {len(result.store.set_ids):,} sets")
            store = result.store
            if spath is not None:
                with prof.phase("save streamlined store"):
                    _save(store, spath)
    prof.finish()
    return CompiledGrammar(vocab, lexer, store, tables, indenter, fingerprint, streamlined=streamline)


def _load(path: Path, lexer: Lexer) -> MaskStore:
    """A cached store, with the lexer's configuration table rebuilt from it (ids match)."""
    store = MaskStore.load(path)
    table = ConfigTable()
    for c in store.configs:
        table.id(c)
    lexer.table = table
    lexer.initial = 0
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
