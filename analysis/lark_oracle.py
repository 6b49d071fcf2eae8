"""lark as the engine's oracle: one (grammar, text) case decided by both, and what counts as agreement.

The engine's language is lark's LALR parser with the basic lexer (and lark's PythonIndenter where a grammar
``%declare``s ``_INDENT``/``_DEDENT``): docs/engine_semantics.md. A case agrees when

- lark accepts the text exactly when the engine, teacher-forced with the text's tokens, takes every token
  and then allows EOS -- for a BPE tokenizer's tokens and for the text's single bytes alike;
- the engine's mask says the same as its advance: the token it refused is not in the mask there, and EOS is
  in the mask at the end exactly when ``is_accepting()``.

A grammar the engine refuses while lark builds it must be refused for a reason the docs give
(:data:`DOCUMENTED_REFUSALS`); one it refuses because the parser would reduce forever must make lark's own
parser loop on the same terminals (checked). Everything else is a disagreement, and :func:`minimise`
shrinks it (the text, then the grammar's lines and alternatives) to a regression test.

Used by ``python -m analysis grammar-fuzz`` (random and mutated grammars) and ``python -m analysis
lark-suite`` (what lark's own tests parse).
"""

from __future__ import annotations

import contextlib
import gc
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["DOCUMENTED_REFUSALS", "Case", "EngineSide", "LarkSide", "Outcome", "TimeLimit", "check_case",
           "classify_refusal", "judge_refusal", "lark_loops_too", "minimise", "time_limit"]

# What the engine may refuse of a grammar lark builds, each described in docs/engine_semantics.md
# ("What the engine refuses"): (category, pattern of the error message).
DOCUMENTED_REFUSALS = [
    ("parser loops", r"the parser would reduce forever without reading input"),
    ("empty language", r"the grammar's language is empty"),
    ("terminal never matches", r"can never match any text"),
    ("regex construct without a DFA", r"cannot be compiled to a DFA"),
    ("zero-width terminal", r"matches the empty string"),
    ("regex module / use_bytes", r"the `regex` module's semantics|use_bytes is not supported"),
    ("no start rule", r"the grammar has no rule|defines no rules"),
    ("resource limit", r"exceeded \("),
]


class TimeLimit(Exception):
    """lark ran past its CPU-time limit (its parser loops on a cyclic grammar, or a regex backtracks)."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`TimeLimit` in this (main) thread once this process has spent `seconds` of CPU time
    (``ITIMER_VIRTUAL``: a loaded machine does not make a fast parse look endless), and again every 50 ms
    of CPU after that. The garbage collector is off meanwhile: a looping parse allocates all the time, and
    a signal landing in a collector callback (hypothesis installs one) has its exception swallowed, which
    let a looping parse run until the machine ran out of memory. Elsewhere, or where the timer does not
    exist, no limit."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def stop(*_):
        raise TimeLimit

    old = signal.signal(signal.SIGVTALRM, stop)
    collecting = gc.isenabled()
    gc.disable()
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds, 0.05)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)
        if collecting:
            gc.enable()


def classify_refusal(error: BaseException) -> str | None:
    """The documented category of the engine's refusal of a grammar, or None if the docs do not give it."""
    from cad_outlines.errors import GrammarError, ResourceLimitError

    if not isinstance(error, (GrammarError, ResourceLimitError)):
        return None
    for name, pattern in DOCUMENTED_REFUSALS:
        if re.search(pattern, str(error)):
            return name
    return None


class LarkSide:
    """lark's LALR parser with the basic lexer (and the indenter where the engine uses it) for a grammar."""

    def __init__(self, grammar: str, *, start: str | None = None, import_paths=(), postlex="auto",
                 parse_seconds: float = 1.0):
        import lark
        import lark.lexer

        from cad_outlines.engine.frontend.grammar_load import postlexer

        # lark compares every pair of regex terminals with interegular (when installed) only to log a warning
        # outside strict mode: a third of its build time here, and nothing of what it parses
        lark.lexer.has_interegular = False
        options = dict(parser="lalr", lexer="basic", import_paths=list(import_paths))
        if start:
            options["start"] = start
        pl = postlexer(grammar, postlex)
        if pl is not None:
            options["postlex"] = pl
        self.parser = lark.Lark(grammar, **options)
        self.parse_seconds = parse_seconds

    def verdict(self, text: str) -> str:
        """"accept", "reject", "loops" (the parser ran past the time limit) or "no verdict" (lark's lexer ran
        past it, a regex backtracking; or its parser ran out of Python stack on a deeply nested text: that says
        nothing about the language)."""
        import lark

        try:
            with time_limit(self.parse_seconds):
                self.parser.parse(text)
            return "accept"
        except lark.exceptions.LarkError:
            return "reject"
        except (IndexError, AssertionError):
            # lark's Indenter on a _NEWLINE without a line break, or on a closing bracket with none open (its
            # `assert self.paren_level >= 0`): not a sentence (docs/engine_semantics.md, "Python indentation")
            return "reject"
        except TimeLimit:
            if self._lexing_is_slow(text):
                return "no verdict"
            return "loops" if self._parsing_is_slow(text) else self.verdict_without_limit(text)
        except RecursionError:
            return "no verdict"

    def _parsing_is_slow(self, text: str, factor: float = 5.0) -> bool:
        """Whether lark's parser runs past `factor` times the limit too (a loop, not a slow moment)."""
        try:
            with time_limit(self.parse_seconds * factor):
                self.parser.parse(text)
        except TimeLimit:
            return True
        except Exception:  # noqa: BLE001 - it ended: an answer, not a loop
            return False
        return False

    def verdict_without_limit(self, text: str) -> str:
        """lark's verdict on a text it has just parsed within the longer limit."""
        import lark

        try:
            self.parser.parse(text)
            return "accept"
        except (lark.exceptions.LarkError, IndexError, AssertionError):
            return "reject"

    def _lexing_is_slow(self, text: str) -> bool:
        """Whether lark's lexer alone runs past the time limit on `text` (a regex that backtracks
        exponentially, not a parser that loops)."""
        try:
            with time_limit(self.parse_seconds):
                for _ in self.parser.lex(text):
                    pass
        except TimeLimit:
            return True
        except Exception:  # noqa: BLE001 - the lexer stopped at an error: it is not what took the time
            return False
        return False


def lark_loops_too(lark_side: LarkSide, grammar: str, *, start: str | None = None, import_paths=(),
                   postlex="auto", seconds: float = 0.5) -> bool | None:
    """Whether lark's own parser loops on the terminals after which the engine says its parser would reduce
    forever (:func:`~cad_outlines.engine.frontend.parser_loops.loop_witness` on the engine's tables of
    `grammar`); None when there is no witness."""
    from lark import Token

    from cad_outlines.engine.frontend.grammar_checks import produced_terminals
    from cad_outlines.engine.frontend.grammar_load import load_rules
    from cad_outlines.engine.frontend.lalr import parse_tables
    from cad_outlines.engine.frontend.parse_tables import END
    from cad_outlines.engine.frontend.parser_loops import loop_witness, looping_floors
    from cad_outlines.engine.store.lexer import lexer_spec_from_lark

    lk = load_rules(grammar, start=start, import_paths=import_paths, postlex=postlex)
    tables = parse_tables(lk.rules, lk.options.start[0])
    witness = loop_witness(tables, looping_floors(tables), produced_terminals(lk, lexer_spec_from_lark(lk)))
    if witness is None:
        return None
    fed, t = witness
    ip = lark_side.parser.parse_interactive("")
    try:
        with time_limit(seconds):
            for name in fed:
                ip.feed_token(Token(name, ""))
            if t == END:
                ip.feed_eof()
            else:
                ip.feed_token(Token(t, ""))
    except TimeLimit:
        return True
    except Exception:  # noqa: BLE001 - lark stopped (an error, an accept): it does not loop there
        return False
    return False


def judge_refusal(error: BaseException, grammar: str, lark_side: LarkSide, **load) -> tuple[str, str | None]:
    """(the category of the engine's refusal of a grammar lark builds, a problem or None): an undocumented
    refusal is a problem, and so is a refusal because the parser would loop where lark's does not (`load`:
    the start, import paths and postlexer the grammar was compiled with)."""
    category = classify_refusal(error)
    if category is None:
        return "undocumented", f"{type(error).__name__}: {error}"
    if category == "parser loops" and lark_loops_too(lark_side, grammar, **load) is not True:
        return category, f"the engine says the parser would loop, lark's does not: {error}"
    return category, None


@dataclass
class EngineSide:
    """The engine for one grammar: its compiled grammar, and how a text becomes token ids (a BPE
    tokenizer's ``encode``, and the text's single bytes)."""

    compiled: object
    encode: Callable[[str], list[int]]
    byte_ids: np.ndarray  # token id of each single byte

    def tokenizations(self, text: str) -> dict[str, list[int]]:
        data = text.encode("utf-8")
        return {"bpe": list(self.encode(text)), "bytes": self.byte_ids[np.frombuffer(data, np.uint8)].tolist()}

    def verdict(self, ids: list[int]) -> tuple[bool, str | None]:
        """(whether every token is taken and EOS is then allowed, a mask/advance inconsistency or None)."""
        from cad_outlines.engine.matcher import Matcher

        m = Matcher(self.compiled)
        n = m.validate(ids)
        if n < len(ids):
            m.advance_many(ids[:n])
            if m.allowed_mask()[ids[n]]:
                return False, f"token {n} ({ids[n]}) is in the mask but advance refuses it"
            return False, None
        m.advance_many(ids)
        accepting = m.is_accepting()
        eos = self.compiled.eos_token_ids
        if bool(m.allowed_mask()[list(eos)].any()) != accepting:
            return accepting, f"EOS in the mask at the end is {not accepting}, is_accepting() {accepting}"
        return accepting, None


@dataclass
class Outcome:
    """One case's result: lark's verdict, the engine's per tokenization, and what disagrees."""

    text: str
    lark: str
    engine: dict[str, bool] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class Case:
    grammar: str
    text: str
    kind: str  # what disagreed ("bpe", "bytes", "mask", "loops", "crash", "refusal")
    detail: str
    start: str | None = None


def check_case(lark_side: LarkSide, engine: EngineSide, text: str) -> Outcome:
    """Decide `text` with lark and with the engine (both tokenizations); the problems, if any."""
    out = Outcome(text, lark_side.verdict(text))
    if out.lark == "loops":
        out.problems.append("loops: lark's parser loops on this text, and the engine compiled the grammar")
        return out
    if out.lark == "no verdict":
        return out
    want = out.lark == "accept"
    for mode, ids in engine.tokenizations(text).items():
        got, inconsistency = engine.verdict(ids)
        out.engine[mode] = got
        if got != want:
            out.problems.append(f"{mode}: lark {'accepts' if want else 'rejects'}, the engine "
                                f"{'accepts' if got else 'rejects'}")
        if inconsistency:
            out.problems.append(f"mask: {mode}: {inconsistency}")
    return out


def minimise(grammar: str, text: str, fails: Callable[[str, str], bool], budget: int = 200) -> tuple[str, str]:
    """A smaller (grammar, text) for which ``fails(grammar, text)`` still holds: characters of the text
    removed in halving chunks, then whole lines and top-level alternatives of the grammar."""
    from .grammar_sampler import _split_top

    calls = [0]

    def still(g: str, t: str) -> bool:
        if calls[0] >= budget:
            return False
        calls[0] += 1
        try:
            return fails(g, t)
        except Exception:  # noqa: BLE001 - a candidate lark refuses, or that breaks otherwise: not smaller
            return False

    chunk = max(1, len(text) // 2)
    while chunk >= 1 and text:
        i, changed = 0, False
        while i < len(text):
            cand = text[:i] + text[i + chunk:]
            if still(grammar, cand):
                text, changed = cand, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    changed = True
    while changed:
        changed = False
        lines = grammar.split("\n")
        for i in range(len(lines)):
            if not lines[i].strip():
                continue
            cand = "\n".join(lines[:i] + lines[i + 1:])
            if still(cand, text):
                grammar, changed = cand, True
                break
            head, sep, body = lines[i].partition(":")
            if sep and not lines[i].startswith("%") and "|" in body:
                alts = _split_top(body, "|")
                for k in range(len(alts)):
                    shorter = lines[:i] + [head + ":" + "|".join(alts[:k] + alts[k + 1:])] + lines[i + 1:]
                    cand = "\n".join(shorter)
                    if still(cand, text):
                        grammar, changed = cand, True
                        break
                if changed:
                    break
    return grammar, text
