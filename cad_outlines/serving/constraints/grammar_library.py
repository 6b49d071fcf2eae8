"""Grammars a serving process knows: shipped ones by name, any by text; compiled once
per (grammar, tokenizer) and kept for the life of the process.

Names: every ``.lark`` file shipped in ``grammars/`` (``copy_edit``, ``json``, ``python``
-- lark's python.lark, start ``file_input``, with its Indenter -- and ``sql``). A grammar
given as text is always read as grammar text: a one-line text that happens to be a file
path or a shipped name is not opened or looked up (a request must not make the server
read its files).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from ...engine.compile import cached_path, compile_grammar
from ...engine.compiled_grammar import CompiledGrammar
from ...engine.frontend.grammar_checks import check_language
from ...engine.frontend.grammar_load import load_rules
from ...engine.frontend.lalr import parse_tables
from ...engine.frontend.terminals import GrammarCompileError
from ...engine.store.lexer import lexer_spec_from_lark
from ...engine.vocabulary import Vocabulary
from ...errors import GrammarError, ResourceLimitError
from ...grammars import available_grammars, grammar_path
from ...limits import enforcing
from ..limits import server_limits
from .request import GrammarSpec, RequestError

__all__ = ["GrammarLibrary", "cached_files", "check_grammar", "forget_checks", "grammar_source_of",
           "known_check", "refuse_file_imports", "remember_check", "shipped_grammar_names"]


def shipped_grammar_names() -> list[str]:
    return available_grammars()


def grammar_source_of(spec: GrammarSpec) -> tuple[str | Path, str | None]:
    """(path or text, start symbol) to compile for a spec; unknown names raise RequestError.

    Text is handed over with a newline in it: :func:`~cad_outlines.grammars.grammar_source`
    reads any one-line str that names a file or a shipped grammar as that file or grammar,
    and a trailing newline changes nothing in a Lark grammar."""
    if spec.name is not None:
        if spec.name not in available_grammars():
            raise RequestError(f"no shipped grammar {spec.name!r}; available: {', '.join(shipped_grammar_names())}")
        return grammar_path(spec.name), spec.start
    text = spec.text if "\n" in spec.text else spec.text + "\n"
    return text, spec.start


def _refusal(e: Exception) -> RequestError:
    if isinstance(e, RequestError):
        return e
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
    that every terminal compiles and that its language is not empty; raises
    :class:`RequestError` saying why not. The verdict
    is kept per grammar key (the last 1024) for the process, so the admission check of a
    grammar seen before -- by vLLM's ``validate_params`` after the gate's thread, or by
    the next request -- is a lookup, not a lark load on the server's event loop."""
    key = spec.key
    with _CHECKED_LOCK:
        known, refusal = key in _CHECKED, _CHECKED.get(key)
    if not known:
        source, start = grammar_source_of(spec)
        try:
            refuse_file_imports(spec)
            _check_loads(source, start)
        except MemoryError:  # a limit of this process, not a verdict on the grammar
            raise
        except Exception as e:
            refusal = str(_refusal(e))
        with _CHECKED_LOCK:
            _CHECKED[key] = refusal
            while len(_CHECKED) > CHECKS_KEPT:
                _CHECKED.popitem(last=False)
    if refusal is not None:
        raise RequestError(refusal)


def _check_loads(source, start) -> None:
    """What a compile checks before any vocabulary work: lark reads the grammar, every
    terminal compiles, the language is not empty, the LALR tables have no conflict."""
    with enforcing(server_limits().compile):  # the library's limits (CAD_OUTLINES_MAX_*), as in the compile
        lk = load_rules(source, start=start)
        spec = lexer_spec_from_lark(lk)
        check_language(lk, spec, lk.options.start[0])
        parse_tables(lk.rules, lk.options.start[0])


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
    """Where :func:`compile_grammar` keeps `spec` compiled for `vocab` in the on-disk cache:
    (the eager, streamlined store's file; the lazy grammar's file), by the same names and
    keys it uses (None when `cache` is False). Computed without loading the grammar:
    whether a file exists says if a compile would be a load (:func:`cached_path`)."""
    if cache is False:
        return None
    source, start = grammar_source_of(spec)
    return (cached_path(source, vocab, start=start, cache=cache),
            cached_path(source, vocab, start=start, lazy=True, cache=cache))


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
            paths = cached_files(spec, self.vocab, self.cache)
        except (RequestError, OSError):
            return False
        found = [p for p in paths or () if p.is_file()]
        for p in found if touch else ():
            try:
                os.utime(p)
            except OSError:
                pass
        return bool(found)

    def _eager_on_disk(self, spec: GrammarSpec) -> bool:
        paths = cached_files(spec, self.vocab, self.cache)
        return paths is not None and paths[0].is_file()

    def get(self, spec: GrammarSpec, *, eager: bool = False) -> CompiledGrammar:
        """The compiled grammar (loaded from the cache or built; `eager`: build the full,
        streamlined store rather than the lazy one); raises :class:`RequestError` if it
        cannot be compiled."""
        key = spec.key
        got = self.loaded(spec)
        if got is not None:
            return got
        with self._lock:
            got = self._compiled.get(key)
            if got is None:
                source, start = grammar_source_of(spec)
                try:
                    refuse_file_imports(spec)
                    got = compile_grammar(source, self.vocab, start=start, cache=self.cache, progress=False,
                                          lazy=not (eager or self._eager_on_disk(spec)),
                                          limits=server_limits().compile)  # CAD_OUTLINES_MAX_*
                except MemoryError:
                    raise
                except Exception as e:
                    raise _refusal(e) from e
                self._compiled[key] = got
                while self.max_loaded is not None and len(self._compiled) > self.max_loaded:
                    self._compiled.popitem(last=False)  # requests in flight keep their own reference
        return got

    def __len__(self) -> int:
        return len(self._compiled)
