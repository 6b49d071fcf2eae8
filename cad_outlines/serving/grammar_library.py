"""Grammars a serving process knows: shipped ones by name, any by text; compiled once
per (grammar, tokenizer) and kept for the life of the process.

Names: every ``.lark`` file shipped in ``grammars/`` (``copy_edit``, ``json``) and
``python`` (lark's own python.lark, start ``file_input``, with its Indenter).
"""

from __future__ import annotations

import threading
from pathlib import Path

import lark

from ..engine.compile import compile_grammar, load_lark
from ..engine.compiled import CompiledGrammar
from ..engine.terminals import GrammarCompileError, lexer_spec_from_lark
from ..engine.vocabulary import Vocabulary
from ..grammars import available_grammars, grammar_path
from .request import GrammarSpec, RequestError

__all__ = ["GrammarLibrary", "shipped_grammar_names", "check_grammar"]

# name -> (path, default start symbol) for grammars that come from lark itself
_LARK_BUNDLED = {"python": ("python.lark", "file_input")}


def shipped_grammar_names() -> list[str]:
    return sorted(set(available_grammars()) | set(_LARK_BUNDLED))


def _source(spec: GrammarSpec) -> tuple[str | Path, str | None]:
    """(path or text, start symbol) for a spec; unknown names raise RequestError."""
    if spec.name is not None:
        if spec.name in _LARK_BUNDLED:
            file, start = _LARK_BUNDLED[spec.name]
            return Path(lark.__file__).parent / "grammars" / file, spec.start or start
        if spec.name not in available_grammars():
            raise RequestError(f"no shipped grammar {spec.name!r}; available: {', '.join(shipped_grammar_names())}")
        return grammar_path(spec.name), spec.start
    return spec.text, spec.start


def check_grammar(spec: GrammarSpec) -> None:
    """Cheap, vocabulary-free check that a grammar loads in lark (LALR, basic lexer) and
    that every terminal compiles; raises :class:`RequestError` saying why not."""
    source, start = _source(spec)
    try:
        lexer_spec_from_lark(load_lark(source, start=start))
    except GrammarCompileError as e:
        raise RequestError(f"grammar does not compile: {e}") from e
    except Exception as e:  # lark's own errors: syntax, undefined rules, LALR conflicts
        raise RequestError(f"grammar does not load in lark: {type(e).__name__}: {e}") from e


class GrammarLibrary:
    """Compiled grammars for one vocabulary (one tokenizer), cached by content key.

    The mask stores also live in the on-disk cache of :func:`compile_grammar` (keyed by
    the grammar's content and the vocabulary's hash), so a second process, or this one
    after a restart, loads instead of building."""

    def __init__(self, vocab: Vocabulary, cache: bool | str | Path = True):
        self.vocab, self.cache = vocab, cache
        self._compiled: dict[str, CompiledGrammar] = {}
        self._lock = threading.Lock()

    def get(self, spec: GrammarSpec) -> CompiledGrammar:
        """The compiled grammar; raises :class:`RequestError` if it cannot be compiled."""
        key = spec.key
        got = self._compiled.get(key)
        if got is not None:
            return got
        with self._lock:
            got = self._compiled.get(key)
            if got is None:
                source, start = _source(spec)
                try:
                    got = compile_grammar(source, self.vocab, start=start, cache=self.cache, progress=False)
                except GrammarCompileError as e:
                    raise RequestError(f"grammar does not compile: {e}") from e
                except RequestError:
                    raise
                except Exception as e:
                    raise RequestError(f"grammar does not load in lark: {type(e).__name__}: {e}") from e
                self._compiled[key] = got
        return got

    def __len__(self) -> int:
        return len(self._compiled)
