"""Grammars a serving process knows: shipped ones by name, any by text, JSON Schemas; compiled once
per (grammar, tokenizer) and kept for the life of the process.

Names: every ``.lark`` file shipped in ``grammars/`` (``copy_edit``, ``json``, ``python``
-- lark's python.lark, start ``file_input``, with its Indenter -- and ``sql``). A grammar
given as text is always read as grammar text: a one-line text that happens to be a file
path or a shipped name is not opened or looked up (a request must not make the server
read its files). A JSON Schema is compiled by :func:`~cad_outlines.compile_json_schema`,
whose cache files are its own: a compile worker builds them in a folder of its own, moves
them into the cache and lists them in a small index file (``schema-<key>.json``), so a
process can tell whether a schema is compiled for its vocabulary without compiling it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from ... import _version
from ...engine import compile as compile_module
from ...engine.compile import cached_path, compile_grammar, compile_json_schema, validate_grammar, wait_for_cache_writes
from ...engine.compiled_grammar import CompiledGrammar
from ...engine.frontend.terminals import GrammarCompileError
from ...engine.vocabulary import Vocabulary
from ...errors import GrammarError, ResourceLimitError
from ...grammars import available_grammars, grammar_path
from ...limits import enforcing
from ..limits import server_limits
from .request import GrammarSpec, RequestError

__all__ = ["GrammarLibrary", "cached_files", "check_grammar", "forget_checks", "grammar_source_of",
           "known_check", "refuse_file_imports", "remember_check", "remove_schema_builds", "schema_index",
           "shipped_grammar_names"]


def shipped_grammar_names() -> list[str]:
    return available_grammars()


def grammar_source_of(spec: GrammarSpec) -> tuple[str | Path, str | None]:
    """(path or text, start symbol) to compile for a Lark spec (by name or text); unknown names raise
    RequestError.

    Text is handed over with a newline in it: :func:`~cad_outlines.grammars.grammar_source`
    reads any one-line str that names a file or a shipped grammar as that file or grammar,
    and a trailing newline changes nothing in a Lark grammar."""
    if spec.name is not None:
        if spec.name not in available_grammars():
            raise RequestError(f"no shipped grammar {spec.name!r}; available: {', '.join(shipped_grammar_names())}")
        return grammar_path(spec.name), spec.start
    text = spec.text if "\n" in spec.text else spec.text + "\n"
    return text, spec.start


def _refusal(e: Exception, spec: GrammarSpec) -> RequestError:
    if isinstance(e, RequestError):
        return e
    if spec.schema is not None:  # the JSON Schema front end's refusals: a keyword it cannot honour, a limit
        what = "refused" if isinstance(e, ResourceLimitError) else "does not compile"
        return RequestError(f"JSON Schema {what}: {e}")
    if isinstance(e, ResourceLimitError):
        return RequestError(f"grammar refused: {e}")
    if isinstance(e, (GrammarCompileError, GrammarError)):
        return RequestError(f"grammar does not compile: {e}")
    return RequestError(f"grammar does not load in lark: {type(e).__name__}: {e}")  # syntax, LALR conflicts...


def refuse_file_imports(spec: GrammarSpec) -> None:
    """A grammar sent as text may ``%import`` from lark's standard library only
    (``%import common.NUMBER``): a relative ``%import .name`` would make the server look for
    a ``.lark`` file on its own disk (relative to its main module or working directory), and
    whether it is there would show in the answer. Raises :class:`RequestError` for one.
    Shipped grammars (by name) import from their own folder, as they always did."""
    if spec.text is None or "%import" not in spec.text:
        return
    from ...engine.frontend.lark_syntax import parse_grammar_text

    tree = parse_grammar_text(spec.text)
    if tree is None:
        try:
            from lark.load_grammar import _parse_grammar

            tree = _parse_grammar(spec.text + "\n", "<string>")
        except Exception:  # noqa: BLE001 - not lark's grammar language: the load refuses it, without any import
            return
    for stmt in tree.find_data("import_rel"):
        path = ".".join(str(c) for c in stmt.children)
        raise RequestError(f"cad_grammar_text: a relative %import (.{path}) would read the server's files; a grammar "
                           "sent as text may import from lark's standard library only (e.g. %import common.NUMBER)")


_CHECKED: OrderedDict[str, str | None] = OrderedDict()  # grammar key -> refusal (None: it loads)
_CHECKED_LOCK = threading.Lock()
CHECKS_KEPT = 1024


def check_grammar(spec: GrammarSpec) -> None:
    """Cheap, vocabulary-free check that a grammar loads (lark's reader, our LALR tables),
    that every terminal compiles and that its language is not empty (a JSON Schema: that it
    compiles for a vocabulary of the 256 bytes); raises
    :class:`RequestError` saying why not. The verdict
    is kept per grammar key (the last 1024) for the process, so the admission check of a
    grammar seen before -- by vLLM's ``validate_params`` after the gate's thread, or by
    the next request -- is a lookup, not a lark load on the server's event loop."""
    key = spec.key
    with _CHECKED_LOCK:
        known, refusal = key in _CHECKED, _CHECKED.get(key)
    if not known:
        try:
            if spec.schema is not None:
                _check_schema(spec.schema, **spec.schema_options())
            else:
                source, start = grammar_source_of(spec)  # an unknown name: refused (and remembered) too
                refuse_file_imports(spec)
                _check_loads(source, start)
        except MemoryError:  # a limit of this process, not a verdict on the grammar
            raise
        except Exception as e:
            refusal = str(_refusal(e, spec))
        with _CHECKED_LOCK:
            _CHECKED[key] = refusal
            while len(_CHECKED) > CHECKS_KEPT:
                _CHECKED.popitem(last=False)
    if refusal is not None:
        raise RequestError(refusal)


def _check_loads(source, start) -> None:
    """What a compile checks before any vocabulary work (:func:`~cad_outlines.engine.compile.validate_grammar`:
    lark reads the grammar, every terminal compiles, the language is not empty, the LALR tables have no
    conflict and no cycle of reductions the parser can reach)."""
    with enforcing(server_limits().compile):  # the library's limits (CAD_OUTLINES_MAX_*), as in the compile
        validate_grammar(source, start=start)


def _check_schema(schema: str, **options) -> None:
    """A JSON Schema compiled, lazily and uncached, for a vocabulary of the 256 bytes: what the front end
    checks (keywords, terminals, parse tables) with almost none of the vocabulary's work."""
    compile_json_schema(schema, Vocabulary.of_bytes(), lazy=True, cache=False, progress=False,
                        limits=server_limits().compile, **options)


def known_check(spec: GrammarSpec) -> tuple[bool, str | None]:
    """(whether :func:`check_grammar` has a verdict for `spec` in this process, the refusal)."""
    with _CHECKED_LOCK:
        return spec.key in _CHECKED, _CHECKED.get(spec.key)


def remember_check(spec: GrammarSpec, refusal: str | None) -> None:
    """Keep a verdict on `spec` reached elsewhere (a compile worker checked and compiled it),
    so :func:`check_grammar` -- vLLM's ``validate_params`` on the server's event loop -- is a
    lookup, never a grammar load."""
    with _CHECKED_LOCK:
        _CHECKED[spec.key] = refusal
        _CHECKED.move_to_end(spec.key)
        while len(_CHECKED) > CHECKS_KEPT:
            _CHECKED.popitem(last=False)


def forget_checks() -> None:
    """Drop the kept verdicts of :func:`check_grammar` (for measurements)."""
    with _CHECKED_LOCK:
        _CHECKED.clear()


def cached_files(spec: GrammarSpec, vocab: Vocabulary, cache: bool | str | Path = True) -> tuple[Path, Path] | None:
    """Where :func:`compile_grammar` keeps a Lark `spec` compiled for `vocab` in the on-disk cache:
    (the eager, streamlined store's file; the lazy grammar's file), by the same names and
    keys it uses (None when `cache` is False). Computed without loading the grammar:
    whether a file exists says if a compile would be a load (:func:`cached_path`)."""
    if cache is False:
        return None
    source, start = grammar_source_of(spec)
    return (cached_path(source, vocab, start=start, cache=cache),
            cached_path(source, vocab, start=start, lazy=True, cache=cache))


def schema_index(spec: GrammarSpec, vocab: Vocabulary, cache: bool | str | Path = True) -> Path | None:
    """The index file listing the cache files of a JSON Schema `spec` compiled for `vocab` (None when
    `cache` is False); keyed by the schema, the vocabulary and the library's versions."""
    if cache is False:
        return None
    folder = compile_module.cache_dir() if cache is True else Path(cache)
    versions = (_version.__version__, compile_module.FORMAT_VERSION, compile_module.FLAT_VERSION,
                compile_module.STREAMLINE_VERSION)
    key = hashlib.sha256(repr((spec.key, vocab.content_hash, versions)).encode()).hexdigest()[:32]
    return folder / f"schema-{key}.json"


SCHEMA_BUILD_PREFIX = ".schema-build-"  # + the building process's id: what a killed worker leaves is removed


def remove_schema_builds(cache: str | Path, pid: int) -> None:
    """Remove the build folders process `pid` left in a cache folder (a worker killed mid-compile)."""
    for folder in Path(cache).glob(f"{SCHEMA_BUILD_PREFIX}{pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)


def _schema_files(index: Path) -> list[Path] | None:
    """The cache files an index lists, with the index (None: it is missing, unreadable or one is gone)."""
    try:
        names = json.loads(index.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    files = [index.parent / str(n) for n in names]
    return [*files, index] if files and all(f.is_file() for f in files) else None


class GrammarLibrary:
    """Compiled grammars for one vocabulary (one tokenizer), cached by content key.

    A grammar whose eager (streamlined) store is in the on-disk cache of
    :func:`compile_grammar` is loaded from it; any other is compiled with ``lazy=True``:
    only the grammar's own phases (python.lark x Qwen2.5: seconds, not the eager store's
    minute), the native core building each lexer configuration's rows the first time a
    mask needs them (same masks). The lazy file is cached too, so a second process, or
    this one after a restart, loads instead of compiling. To serve a grammar from the
    faster streamlined store, build it once beforehand (``compile_grammar(name, vocab)``)."""

    def __init__(self, vocab: Vocabulary, cache: bool | str | Path = True, *, max_loaded: int | None = None):
        self.vocab, self.cache = vocab, cache
        self.max_loaded = max_loaded  # None: no bound; else least recently used grammars out
        self._compiled: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def loaded(self, spec: GrammarSpec) -> CompiledGrammar | None:
        """The grammar if this process has it already (no work at all), else None."""
        got = self._compiled.get(spec.key)
        if got is not None and self.max_loaded is not None:
            try:
                self._compiled.move_to_end(spec.key)
            except KeyError:  # evicted meanwhile by another thread
                pass
        return got

    def on_disk(self, spec: GrammarSpec, *, touch: bool = False) -> bool:
        """Whether :meth:`get` would only load the grammar from the on-disk cache; `touch`
        marks the files as just used (the cache evicts least recently used files first)."""
        try:
            if spec.schema is not None:
                index = schema_index(spec, self.vocab, self.cache)
                found = (_schema_files(index) if index is not None else None) or []
            else:
                found = [p for p in cached_files(spec, self.vocab, self.cache) or () if p.is_file()]
        except (RequestError, GrammarError, OSError):  # not a grammar at all: a compile says why
            return False
        for p in found if touch else ():
            try:
                os.utime(p)
            except OSError:
                pass
        return bool(found)

    def _eager_on_disk(self, spec: GrammarSpec) -> bool:
        paths = cached_files(spec, self.vocab, self.cache)
        return paths is not None and paths[0].is_file()

    def _compile(self, spec: GrammarSpec, cache: bool | str | Path, eager: bool) -> CompiledGrammar:
        """Compile (or load from `cache`) a spec. A JSON Schema is always built whole (eager): a compile
        worker builds it before the engine loads it, so no row is built inside an engine step."""
        limits = server_limits().compile  # CAD_OUTLINES_MAX_*
        try:
            if spec.schema is not None:
                return compile_json_schema(spec.schema, self.vocab, cache=cache, progress=False, lazy=False,
                                           limits=limits, **spec.schema_options())
            source, start = grammar_source_of(spec)
            refuse_file_imports(spec)
            return compile_grammar(source, self.vocab, start=start, cache=cache, progress=False,
                                   lazy=not (eager or self._eager_on_disk(spec)), limits=limits)
        except MemoryError:
            raise
        except Exception as e:
            raise _refusal(e, spec) from e

    def build(self, spec: GrammarSpec, *, eager: bool = False) -> None:
        """Compile `spec` into the on-disk cache (a compile worker's job; see :meth:`get` for `eager`). A
        JSON Schema is built in a folder of its own inside the cache, its files moved into the cache and
        listed in its index (:func:`schema_index`), the index written last."""
        if spec.schema is None or self.cache is False:
            self.get(spec, eager=eager)
            return
        index = schema_index(spec, self.vocab, self.cache)
        index.parent.mkdir(parents=True, exist_ok=True)
        own = Path(tempfile.mkdtemp(prefix=f"{SCHEMA_BUILD_PREFIX}{os.getpid()}-", dir=index.parent))
        try:
            self._compile(spec, own, eager=True)
            wait_for_cache_writes()
            names = sorted(p.name for p in own.iterdir() if p.is_file() and ".tmp" not in p.name)
            if not names:  # loaded from this process's memory: nothing to list (a worker, a fresh process, writes)
                return
            for name in names:
                os.replace(own / name, index.parent / name)
            tmp = own / index.name
            tmp.write_text(json.dumps({"files": names}), encoding="utf-8")
            os.replace(tmp, index)
        finally:
            shutil.rmtree(own, ignore_errors=True)

    def get(self, spec: GrammarSpec, *, eager: bool = False) -> CompiledGrammar:
        """The compiled grammar (loaded from the cache or built; `eager`: build the full,
        streamlined store rather than the lazy one; a JSON Schema is always built whole); raises
        :class:`RequestError` if it cannot be compiled."""
        key = spec.key
        got = self.loaded(spec)
        if got is not None:
            return got
        with self._lock:
            got = self._compiled.get(key)
            if got is None:
                got = self._compiled[key] = self._compile(spec, self.cache, eager)
                while self.max_loaded is not None and len(self._compiled) > self.max_loaded:
                    self._compiled.popitem(last=False)  # requests in flight keep their own reference
        return got

    def __len__(self) -> int:
        return len(self._compiled)
