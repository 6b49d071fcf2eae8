"""An independent checker of docs/engine_semantics.md ("which next tokens are legal").

It shares no code with ``cad_outlines.engine``. The known part of a text is lexed by lark's own
``BasicLexer`` scanner (terminal order, ``_create_unless`` and the "unless" callbacks all come from
lark's objects) and parsed by lark's own LALR parse table (``ParserState.feed_token``); the
postlexer, when there is one, is lark's ``Indenter.handle_NL``. Only the *future* -- does a
continuation ``u`` exist that completes the lexeme in progress while keeping every lexing decision
already taken -- is decided with finite automata, built by ``interegular`` from the very regexps
lark compiles (``TerminalDef.pattern.to_regexp()``).

How a text P is decided (P = A + T in the doc's words):

* lark lexes P as far as it goes: lexemes l1..ln, then possibly an un-lexable tail.
* For every lexeme li we run, from li's start to the end of P, the automaton of every terminal
  ordered before li's terminal and of li's own terminal, re-anchored at li's end (the *watch* of
  li). lark already guarantees that none of them changes li inside P (if an automaton says
  otherwise, lark and the automata disagree, and the disagreement is recorded in
  ``inconsistencies``); the ones still alive are the only way the future can change a decision.
  A lexeme whose watch is empty is final.
* Candidate splits: T empty (P lexes completely and the parser accepts l1..ln), the un-lexable
  tail (A = all lexemes), and A = l1..l(i-1) for every lexeme li with a non-empty watch (any other
  split would need a terminal ordered before or equal to li's terminal to still match past P).
* For a split and a candidate terminal X (alive on T), a breadth-first search over the product of
  automata decides whether some u exists with X's match on T+u being all of T+u, no terminal
  ordered before X alive on T ever matching on T+u, no watch of l1..l(i-1) ever firing on P+u, and
  the label (X, or the string terminal the "unless" rule gives) accepted by the parser (for a
  Python ``_NEWLINE`` in progress: the ``_INDENT``/``_DEDENT`` outcome of its indentation, tracked in
  the search). Every witness u the search returns is re-lexed by lark and must give exactly the
  predicted lexemes; a mismatch is recorded in ``inconsistencies``.

The automata. String terminals are built by ``interegular``. Regexp terminals are compiled from
Python's own regex parser (``re._parser``) into a leftmost-first Pike VM -- ordered threads,
lookbehind checked on the characters already read, negative lookahead as guard threads that kill
their owner when they match -- which reproduces ``re.match``'s choice of match (python.lark's
strings with lookbehind and lazy quantifiers, ``DEC_NUMBER``'s negative lookahead, ``NAME``'s
Unicode ``\\w``, and ``a|ab``, where ``re`` does not take the longest match); it is determinized over
the character classes. ``automata="interegular"`` builds longest-match DFAs with interegular
wherever it can, to cross-check the two. Character classes are the exact sets Python's ``re``
matches (computed by running each class over all code points), case-insensitive literals
included (``(?i:s)`` matches U+017F LONG S).

Incomplete UTF-8 at the end of the bytes: the completions form code point ranges; they are grouped
by the automata's character classes and one code point per class is tried, which covers every
completion exactly. ``exhaustive_utf8=True`` tries every completion when one byte is missing.

Known limits: positive lookahead, anchors (``^ $ \\b``), backreferences, possessive and atomic
groups and non-Indenter postlexers raise ``UnsupportedGrammar``; lark ``%declare``d terminals other
than the Indenter's are not produced.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import OrderedDict, deque
from copy import copy

import interegular
from interegular import patterns as _ip
from interegular.fsm import anything_else
from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedToken
from lark.indenter import DedentError, Indenter
from lark.lexer import UnlessCallback
from lark.parsers.lalr_parser_state import ParserState
from lark.utils import TextSlice

try:  # Python's own regex parser
    import re._constants as _sc
    import re._parser as _sp
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sc
    import sre_parse as _sp

__all__ = ["LegalityChecker", "UnsupportedGrammar"]


class UnsupportedGrammar(Exception):
    pass


# ---------------------------------------------------------------------------- character classes
_ALL_CHARS: str | None = None
_CLASS_CACHE: dict[str, tuple[bool, frozenset]] = {}


def _all_chars() -> str:
    global _ALL_CHARS
    if _ALL_CHARS is None:
        _ALL_CHARS = "".join(map(chr, itertools.chain(range(0xD800), range(0xE000, 0x110000))))
    return _ALL_CHARS


def _class_charset(rx: str) -> tuple[bool, frozenset]:
    """The exact set of code points the one-character regexp ``rx`` matches, as
    (complemented, chars): membership is ``(c in chars) != complemented``."""
    r = _CLASS_CACHE.get(rx)
    if r is None:
        allc = _all_chars()
        outside = re.sub(rx, "", allc)
        if len(outside) <= len(allc) // 2:
            r = (True, frozenset(outside))
        else:
            r = (False, frozenset(re.findall(rx, allc)))
        _CLASS_CACHE[rx] = r
    return r


def _special_case_chars(letters: set[str]) -> set[str]:
    """Code points that Python's re matches case-insensitively with one of ``letters`` but that
    are neither their lower nor upper case (e.g. U+017F LONG S for 's', U+212A KELVIN for 'k')."""
    if not letters:
        return set()
    cls = "[" + "".join(re.escape(x) for x in sorted(letters)) + "]"
    hits = set(re.findall("(?i)" + cls, _all_chars()))
    expanded = set(letters) | {x.lower() for x in letters} | {x.upper() for x in letters}
    return hits - expanded


def _is_lazy(rx: str) -> bool:
    """Does the regexp use a lazy quantifier (``*? +? ?? {m,n}?``)?"""
    i, in_class, n = 0, False, len(rx)
    while i < n:
        c = rx[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if i + 1 < n and rx[i + 1] == "^":
                i += 1
            if i + 1 < n and rx[i + 1] == "]":
                i += 1
        elif c in "*+}" and i + 1 < n and rx[i + 1] == "?":
            return True
        elif c == "?" and i > 0 and rx[i - 1] != "(" and i + 1 < n and rx[i + 1] == "?":
            return True
        i += 1
    return False


_LOOKAROUND = re.compile(r"\(\?(?:=|!|<=|<!)")
_CLASS_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[wWdDsSbBAZ]")


def _groups(node, flags, out):
    """The character groups of an interegular pattern, with their effective flags."""
    if isinstance(node, _ip.Pattern):
        f = _ip._combine_flags(flags, node.added_flags, node.removed_flags)
        for o in node.options:
            _groups(o, f, out)
    elif isinstance(node, _ip._Concatenation):
        for p in node.parts:
            _groups(p, flags, out)
    elif isinstance(node, _ip._Repeated):
        _groups(node.base, flags, out)
    elif isinstance(node, _ip._NonCapturing):
        _groups(node.inner, flags, out)
    elif isinstance(node, _ip._CharGroup):
        out.append((node.chars, node.negated, bool(flags & _ip.REFlags.I)))
    elif node is _ip._DOT:
        out.append((frozenset() if flags & _ip.REFlags.S else frozenset("\n"), True, False))


def _py_member(group, c: str) -> bool:
    chars, negated, icase = group
    if not chars:
        return negated
    rx = ("(?i)" if icase else "") + "[" + ("^" if negated else "") + "".join(re.escape(x) for x in sorted(chars)) + "]"
    return re.fullmatch(rx, c) is not None


def _ig_member(group, c) -> bool:
    chars, negated, icase = group
    if c is anything_else:
        return negated
    if icase:
        hit = c in chars or any(c == x.lower() or c == x.upper() for x in chars)
    else:
        hit = c in chars
    return hit != negated


# ---------------------------------------------------------------------------- Pike VM (re semantics)
_CATS = {_sc.CATEGORY_DIGIT: r"\d", _sc.CATEGORY_NOT_DIGIT: r"\D", _sc.CATEGORY_SPACE: r"\s",
         _sc.CATEGORY_NOT_SPACE: r"\S", _sc.CATEGORY_WORD: r"\w", _sc.CATEGORY_NOT_WORD: r"\W"}
_FLAG_LETTERS = ((_sc.SRE_FLAG_IGNORECASE, "i"), (_sc.SRE_FLAG_DOTALL, "s"), (_sc.SRE_FLAG_ASCII, "a"))


class _PikeProgram:
    """A regexp compiled, from Python's own parse of it, into a thread program:
    ['C', class, next] reads a character, ['S', (alternatives in priority order)],
    ['LB', negated, sub, width, next] a lookbehind, ['LA', sub, next] a negative lookahead,
    ['M'] the match. Sub-programs (assertions) end in their own ['M']."""

    def __init__(self, regexp: str):
        self.ins: list[list] = []
        self.classes: list[str] = []  # one-character regexps
        self._cls_ids: dict[str, int] = {}
        self.lb_classes: set[int] = set()
        self.width = 0  # longest lookbehind
        try:
            parsed = _sp.parse(regexp)
        except re.error as e:
            raise UnsupportedGrammar(f"/{regexp}/: {e}") from e
        flags = parsed.state.flags
        if flags & (_sc.SRE_FLAG_LOCALE | _sc.SRE_FLAG_MULTILINE | _sc.SRE_FLAG_VERBOSE):
            raise UnsupportedGrammar(f"/{regexp}/: flags {flags}")
        self.entry = self._comp(list(parsed), self._add(["M"]), flags, "main")

    def _add(self, ins) -> int:
        self.ins.append(ins)
        return len(self.ins) - 1

    def _cls(self, op, av, flags) -> int:
        esc = re.escape
        if op is _sc.LITERAL:
            body = esc(chr(av))
        elif op is _sc.NOT_LITERAL:
            body = "[^" + esc(chr(av)) + "]"
        elif op is _sc.ANY:
            body = "."
        else:  # IN
            neg, parts = False, []
            for iop, iav in av:
                if iop is _sc.NEGATE:
                    neg = True
                elif iop is _sc.LITERAL:
                    parts.append(esc(chr(iav)))
                elif iop is _sc.RANGE:
                    parts.append(esc(chr(iav[0])) + "-" + esc(chr(iav[1])))
                elif iop is _sc.CATEGORY and iav in _CATS:
                    parts.append(_CATS[iav])
                else:
                    raise UnsupportedGrammar(f"character class item {iop} {iav}")
            body = "[" + ("^" if neg else "") + "".join(parts) + "]"
        fl = "".join(letter for flag, letter in _FLAG_LETTERS if flags & flag)
        rx = f"(?{fl}:{body})" if fl else body
        if rx not in self._cls_ids:
            self._cls_ids[rx] = len(self.classes)
            self.classes.append(rx)
        return self._cls_ids[rx]

    def _comp(self, items, nxt, flags, ctx) -> int:
        for op, av in reversed(items):
            nxt = self._comp1(op, av, nxt, flags, ctx)
        return nxt

    def _comp1(self, op, av, nxt, flags, ctx) -> int:
        if op in (_sc.LITERAL, _sc.NOT_LITERAL, _sc.ANY, _sc.IN):
            c = self._cls(op, av, flags)
            if ctx == "lb":
                self.lb_classes.add(c)
            return self._add(["C", c, nxt])
        if op is _sc.BRANCH:
            return self._add(["S", tuple(self._comp(list(alt), nxt, flags, ctx) for alt in av[1])])
        if op is _sc.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            return self._comp(list(sub), nxt, (flags | add_flags) & ~del_flags, ctx)
        if op in (_sc.MAX_REPEAT, _sc.MIN_REPEAT):
            lo, hi, sub = av
            greedy = op is _sc.MAX_REPEAT
            if hi == _sc.MAXREPEAT:
                loop = self._add(["S", None])
                body = self._comp(list(sub), loop, flags, ctx)
                self.ins[loop][1] = (body, nxt) if greedy else (nxt, body)
                tail = loop
            else:
                tail = nxt
                for _ in range(hi - lo):
                    body = self._comp(list(sub), tail, flags, ctx)
                    tail = self._add(["S", (body, nxt) if greedy else (nxt, body)])
            for _ in range(lo):
                tail = self._comp(list(sub), tail, flags, ctx)
            return tail
        if op in (_sc.ASSERT, _sc.ASSERT_NOT) and ctx == "main":
            direction, sub = av
            negated = op is _sc.ASSERT_NOT
            if direction == 1:
                if not negated:
                    raise UnsupportedGrammar("positive lookahead")
                s = self._comp(list(sub), self._add(["M"]), flags, "guard")
                return self._add(["LA", s, nxt])
            lo, hi = sub.getwidth()
            if lo != hi:
                raise UnsupportedGrammar("variable-width lookbehind")
            s = self._comp(list(sub), self._add(["M"]), flags, "lb")
            self.width = max(self.width, lo)
            return self._add(["LB", negated, s, lo, nxt])
        raise UnsupportedGrammar(f"regex construct {op} not supported")


_MATCHED = "matched"


class _PikeDFA:
    """The determinized leftmost-first Pike VM of one terminal.

    A state is the ordered list of threads ('T', pc, guards) and match marks ('M', guards, tag),
    the projection of the last characters read (for lookbehinds) and whether the step that led
    here was an *event*: a match confirmed that no re-anchored match outranks, or the anchored
    match withdrawn by a lookahead. tag: 'new' = a match ending here, 'old' = a tentative match
    from earlier (waiting on a lookahead), 'anc' = the lexeme's own match (after ``anchor``)."""

    MAX_STATES = 50000

    def __init__(self, prog: _PikeProgram, memb: list[list[bool]], nsym: int, name: str):
        self.prog, self.ins, self.memb, self.nsym, self.name = prog, prog.ins, memb, nsym, name
        lbc = sorted(prog.lb_classes)
        self.W = prog.width
        self.proj = [tuple(memb[c][a] for c in lbc) for a in range(nsym)]
        self.lbidx = {c: i for i, c in enumerate(lbc)}
        # symbols that behave alike for this program share one step computation
        groups: dict = {}
        for a in range(nsym):
            groups.setdefault((tuple(memb[c][a] for c in range(len(prog.classes))), self.proj[a]), []).append(a)
        self.sym_groups = list(groups.values())
        self.keys: list = []
        self.ids: dict = {}
        self.trans: list[dict[int, int]] = []
        self.anchor: dict[int, int] = {}
        self.start_by_hist: dict = {}
        values = sorted(set(self.proj))
        hists = [h for n in range(self.W + 1) for h in itertools.product(values, repeat=n)]
        todo = deque()
        for h in hists:
            q = self._intern(self._start_key(h), todo)
            if q is not None:
                self.start_by_hist[h] = q
        while todo:
            q = todo.popleft()
            key = self.keys[q]
            row = {}
            for syms in self.sym_groups:
                k2 = self._step(key, syms[0])
                if k2 is not None:
                    q2 = self._intern(k2, todo)
                    for a in syms:
                        row[a] = q2
            self.trans[q] = row
            self.anchor[q] = self._intern(self._anchor_key(key), todo)
        n = len(self.keys)
        self.event = frozenset(q for q in range(n) if self.keys[q][2])
        firsts = [next((it[2] for it in self.keys[q][0] if it[0] == "M"), None) for q in range(n)]
        self.endok = frozenset(q for q in range(n) if firsts[q] == "new")
        self.badend = frozenset(q for q in range(n) if firsts[q] in ("new", "old"))
        rev: list[set] = [set() for _ in range(n)]
        for q, row in enumerate(self.trans):
            for q2 in row.values():
                rev[q2].add(q)

        def back(targets):
            seen, stack = set(targets), list(targets)
            while stack:
                for r in rev[stack.pop()]:
                    if r not in seen:
                        seen.add(r)
                        stack.append(r)
            return seen

        self.livemain = frozenset(back(self.endok))
        g = back(self.event | self.badend)
        self.keep = frozenset(q for q in range(n) if any(q2 in g for q2 in self.trans[q].values()))

    def _intern(self, key, todo):
        if key is None:
            return None
        q = self.ids.get(key)
        if q is None:
            if len(self.keys) >= self.MAX_STATES:
                raise UnsupportedGrammar(f"{self.name}: more than {self.MAX_STATES} automaton states")
            q = len(self.keys)
            self.ids[key] = q
            self.keys.append(key)
            self.trans.append({})
            todo.append(q)
        return q

    # -- the VM
    def _gclosure(self, pcs):
        out, stack, seen = set(), list(pcs), set()
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            ins = self.ins[pc]
            if ins[0] == "C":
                out.add(pc)
            elif ins[0] == "M":
                return _MATCHED
            elif ins[0] == "S":
                stack.extend(ins[1])
            else:
                raise UnsupportedGrammar(f"{self.name}: assertion inside an assertion")
        return frozenset(out)

    def _gstep(self, g, test):
        return self._gclosure([self.ins[pc][2] for pc in g if test(self.ins[pc][1])])

    def _gadvance(self, guards, sym):
        """Step every guard (negative lookahead) of a thread; None when one of them matched."""
        out = []
        for g in guards:
            g2 = self._gstep(g, lambda c: self.memb[c][sym])
            if g2 is _MATCHED:
                return None
            if g2:
                out.append(g2)
        return frozenset(out)

    def _lb(self, sub, w, hist) -> bool:
        if len(hist) < w:
            return False
        cur = self._gclosure([sub])
        for entry in hist[len(hist) - w:]:
            if cur is _MATCHED or not cur:
                return False
            cur = self._gstep(cur, lambda c: entry[self.lbidx[c]])
        return cur is _MATCHED

    def _closure(self, pc, guards, hist, visited, out):
        ins = self.ins[pc]
        if (pc, guards) in visited:
            return
        visited.add((pc, guards))
        op = ins[0]
        if op == "C":
            out.append(("T", pc, guards))
        elif op == "M":
            out.append(["M", guards, "new", not guards])
        elif op == "S":
            for e in ins[1]:
                self._closure(e, guards, hist, visited, out)
        elif op == "LB":
            _, negated, sub, w, nxt = ins
            if self._lb(sub, w, hist) != negated:
                self._closure(nxt, guards, hist, visited, out)
        elif op == "LA":
            _, sub, nxt = ins
            g = self._gclosure([sub])
            if g is _MATCHED:
                return
            self._closure(nxt, guards | {g} if g else guards, hist, visited, out)

    @staticmethod
    def _settle(out, event):
        """Confirmed matches cut every lower-priority thread; an unanchored one is an event."""
        res, anchor_before = [], False
        for it in out:
            if it[0] == "M":
                _, guards, tag, confirmed = it
                if confirmed:
                    if tag != "anc" and not anchor_before:
                        event = True
                    res.append(("M", (), tag))
                    break
                res.append(("M", guards, tag))
                if tag == "anc":
                    anchor_before = True
            else:
                res.append(it)
        return tuple(res), event

    def _start_key(self, hist):
        out: list = []
        self._closure(self.prog.entry, frozenset(), hist, set(), out)
        items, event = self._settle(out, False)
        return (items, hist, event) if items or event else None

    def _step(self, key, sym):
        items, hist, _ = key
        hist2 = (hist + (self.proj[sym],))[max(0, len(hist) + 1 - self.W):] if self.W else ()
        out, visited, event = [], set(), False
        for it in items:
            if it[0] == "T":
                _, pc, guards = it
                _, cls, nxt = self.ins[pc]
                if not self.memb[cls][sym]:
                    continue
                g2 = self._gadvance(guards, sym)
                if g2 is not None:
                    self._closure(nxt, g2, hist2, visited, out)
            else:
                _, guards, tag = it
                if not guards:
                    continue  # confirmed at an earlier step: settled
                g2 = self._gadvance(guards, sym)
                if g2 is None:
                    if tag == "anc":
                        event = True
                    continue
                out.append(["M", g2, "old" if tag == "new" else tag, not g2])
        items2, event = self._settle(out, event)
        if not items2:
            return ((), (), True) if event else None
        return (items2, hist2, event)

    @staticmethod
    def _anchor_key(key):
        items, hist, _ = key
        return (tuple(("M", it[1], "anc") if it[0] == "M" and it[2] == "new" else it for it in items), hist, False)

    def start(self, text, pos):
        h = tuple(self.proj_char(c) for c in text[max(0, pos - self.W):pos]) if self.W else ()
        return self.start_by_hist.get(h, -1)

    proj_char = None  # set by the checker: char -> projection


# ---------------------------------------------------------------------------- the checker
class _Analysis:
    """What the checker knows about one text: lark's lexemes, their watches, the parser state."""

    __slots__ = ("text", "lex", "lex_end", "watches", "m", "pst", "tail")

    def __init__(self, text, lex, lex_end, watches, m, pst0, tail):
        self.text = text
        self.lex = lex  # [(start, end, terminal index, label)]
        self.lex_end = lex_end  # where lark's lexing stopped
        self.watches = watches  # {lexeme index: ((automaton, state), ...)} for non-empty watches
        self.m = m  # first lexeme index with a watch (len(lex) if none): lexemes before it are final
        self.pst = [pst0]  # parser states after lex[:m], lex[:m+1], ...; None = rejected
        self.tail = tail  # ((automaton, state), ...) alive on text[lex_end:] when lexing stopped early


_MISSING = object()


class LegalityChecker:
    """``is_legal_prefix(bytes)`` and ``is_sentence(bytes)`` per docs/engine_semantics.md.

    ``automata``: "auto" (the Pike VM for regexp terminals, interegular DFAs for string terminals),
    "pike" (the Pike VM for every terminal) or "interegular" (interegular DFAs, longest match,
    wherever the regexp has no lookaround, lazy quantifier or class escape; used to cross-check)."""

    def __init__(self, grammar_text: str, start: str | None = None, import_paths=(), postlex=None,
                 *, automata: str = "auto", verify: bool = True, exhaustive_utf8: bool = False,
                 cache_size: int = 4096):
        self.start = start or "start"
        self.lark = Lark(grammar_text, parser="lalr", lexer="basic", start=self.start,
                         import_paths=list(import_paths), postlex=postlex)
        self.verify = verify
        self.exhaustive_utf8 = exhaustive_utf8
        self.cache_size = cache_size
        self.inconsistencies: list[tuple[str, str, str]] = []
        self.stats = {"prefix_queries": 0, "analyses": 0, "searches": 0, "witnesses_verified": 0}

        front = self.lark.parser.lexer
        lexer = getattr(front, "lexer", front)  # PostLexConnector wraps the BasicLexer
        self._scanner = lexer.scanner  # builds lark's scanner: _create_unless + the sort
        scan_terms = list(self._scanner.terminals)  # the order, "unless"-embedded strings removed
        scan_names = {t.name for t in scan_terms}
        all_terms = list(lexer.terminals)
        names = [t.name for t in scan_terms] + [t.name for t in all_terms if t.name not in scan_names]
        self.names = names
        self.index = {nm: i for i, nm in enumerate(names)}
        self.n_scan = len(scan_terms)
        by_name = {t.name: t for t in all_terms}
        self._ignored = [nm in lexer.ignore_types for nm in names]
        self._callback = dict(lexer.callback)
        self._unless: list[tuple[int, ...]] = [()] * len(names)
        for nm, cb in self._callback.items():
            if not isinstance(cb, UnlessCallback):
                raise UnsupportedGrammar(f"terminal {nm} has a callback that is not lark's 'unless' rule")
            self._unless[self.index[nm]] = tuple(self.index[t.name] for t in cb.scanner.terminals)

        # ---- postlexer (lark's Indenter) ----
        self._postlex = postlex
        self._NL = None
        if postlex is not None:
            if not isinstance(postlex, Indenter):
                raise UnsupportedGrammar("only lark Indenter postlexers are supported")
            self._ind = copy(postlex)
            self._NL = postlex.NL_type
            self._open = set(postlex.OPEN_PAREN_types)
            self._close = set(postlex.CLOSE_PAREN_types)
            self._INDENT = postlex.INDENT_type
            self._DEDENT = postlex.DEDENT_type
            self._tab = postlex.tab_len

        self._build_automata([by_name[nm].pattern.to_regexp() for nm in names],
                             [by_name[nm].pattern.type for nm in names], automata)

        # ---- parser (lark's own parse table, tree callbacks off) ----
        ip = self.lark.parse_interactive("", start=self.start)
        ps = ip.parser_state
        self._conf = copy(ps.parse_conf)
        self._conf.callbacks = {}
        self._plexer = ps.lexer
        self._pst0 = (tuple(ps.state_stack), 0, (0,))
        self._feed_memo: dict = {}
        self._search_memo: dict = {}
        self._utf8_memo: dict = {}
        self._sentence_memo: OrderedDict = OrderedDict()
        self._cache: OrderedDict[str, _Analysis] = OrderedDict()
        self._empty = _Analysis("", [], 0, {}, 0, self._pst0, ())

    # ------------------------------------------------------------------ automata construction
    def _build_automata(self, regexps, types, mode):
        if mode not in ("auto", "pike", "interegular"):
            raise ValueError(f"automata={mode!r}")
        names = self.names
        kinds, fsms, groups, progs = [], {}, {}, {}
        for k, (nm, rx) in enumerate(zip(names, regexps)):
            if mode == "interegular":
                use_pike = _LOOKAROUND.search(rx) or _CLASS_ESCAPE.search(rx) or _is_lazy(rx)
            else:
                use_pike = mode == "pike" or types[k] == "re"
            if not use_pike:
                try:
                    pat = interegular.parse_pattern(rx)
                    fsms[k] = pat.to_fsm()
                    g: list = []
                    _groups(pat, _ip.REFlags(0), g)
                    groups[k] = g
                except Exception:
                    use_pike = True
            if use_pike:
                progs[k] = _PikeProgram(rx)
            kinds.append("pike" if use_pike else "fsm")
        self._kind = kinds

        # interegular alphabets, with Python's case folding patched in
        letters = {x for g in groups.values() for (chars, _neg, icase) in g if icase for x in chars}
        special = _special_case_chars(letters)
        keymaps: dict[int, dict] = {}
        for k, fsm in fsms.items():
            g = groups[k]
            km = {c: fsm.alphabet[c] for c in fsm.alphabet if c is not anything_else}
            if special and any(icase for (_c, _n, icase) in g):
                reps = {}
                for sym in fsm.alphabet:
                    reps.setdefault(tuple(_ig_member(gr, sym) for gr in g), fsm.alphabet[sym])
                for c in special:
                    want = tuple(_py_member(gr, c) for gr in g)
                    if want != tuple(_ig_member(gr, c) for gr in g):
                        if want not in reps:
                            raise UnsupportedGrammar(f"{names[k]}: case folding of {c!r} not representable")
                        km[c] = reps[want]
            keymaps[k] = km

        # the symbols: code points refined by every class of every automaton
        block: dict[str, int] = {}
        counter = itertools.count(1)

        def refine(chars):
            parts: dict[int, list] = {}
            for c in chars:
                parts.setdefault(block.get(c, 0), []).append(c)
            for cs in parts.values():
                nid = next(counter)
                for c in cs:
                    block[c] = nid

        for k, km in keymaps.items():
            by_key: dict = {}
            for c, key in km.items():
                by_key.setdefault(key, []).append(c)
            for cs in by_key.values():
                refine(cs)
        charsets = {}
        for prog in progs.values():
            for rx in prog.classes:
                if rx not in charsets:
                    charsets[rx] = _class_charset(rx)
                    refine(charsets[rx][1])
        if self._NL is not None:
            for c in " \t\n":
                refine(c)
        ids = {0: 0}
        for b in sorted(set(block.values())):
            ids[b] = len(ids)
        self._char_sym = {c: ids[b] for c, b in block.items()}
        nsym = len(ids)
        self._explicit = set(block)
        self._explicit_sorted = sorted(ord(c) for c in block)
        other = next(c for c in "\u00e9\u4e2d\u0416\U0001F600\u2603\u00ff\u0100\u3042\uac00\U000e0100"
                     if c not in block)
        members: list[list[str]] = [[] for _ in range(nsym)]
        for c in sorted(block):
            if len(members[self._char_sym[c]]) < 64:
                members[self._char_sym[c]].append(c)
        self._rep = [other] + [next((c for c in ms if c.isascii() and c.isprintable()), ms[0]) for ms in members[1:]]
        self._sym_indent = [0] * nsym
        if self._NL is not None:
            for c, eff in (("\n", "nl"), (" ", 1), ("\t", self._tab)):
                self._sym_indent[self._char_sym[c]] = eff

        # per-terminal tables (the same shape for both kinds of automata)
        n = len(names)
        self._trans: list = [None] * n
        self._event: list = [None] * n
        self._endok: list = [None] * n
        self._badend: list = [None] * n
        self._keep: list = [None] * n
        self._livemain: list = [None] * n
        self._anchor: list = [None] * n
        self._start0: list = [-1] * n
        self._pike: list = [None] * n
        for k in range(n):
            if kinds[k] == "fsm":
                self._fsm_tables(k, fsms[k], keymaps[k], nsym)
            else:
                prog = progs[k]
                memb = [[((self._rep[a] in charsets[rx][1]) != charsets[rx][0]) for a in range(nsym)]
                        for rx in prog.classes]
                dfa = _PikeDFA(prog, memb, nsym, names[k])
                lbc = sorted(prog.lb_classes)
                cache: dict = {}

                def proj_char(c, _m=memb, _l=lbc, _cache=cache):
                    r = _cache.get(c)
                    if r is None:
                        a = self._char_sym.get(c, 0)
                        r = _cache[c] = tuple(_m[cl][a] for cl in _l)
                    return r

                dfa.proj_char = proj_char
                self._pike[k] = dfa
                self._trans[k] = dfa.trans
                self._event[k], self._endok[k], self._badend[k] = dfa.event, dfa.endok, dfa.badend
                self._keep[k], self._livemain[k] = dfa.keep, dfa.livemain
                self._anchor[k] = dfa.anchor

    def _fsm_tables(self, k, fsm, km, nsym):
        other_key = fsm.alphabet[anything_else] if anything_else in fsm.alphabet else None
        sym_key = [other_key] * nsym  # a symbol is all named by this automaton, or none of it is
        for c, key in km.items():
            sym_key[self._char_sym[c]] = key
        states = sorted(fsm.states, key=lambda s: (s != fsm.initial, s))
        num = {s: i for i, s in enumerate(states)}
        raw = []
        for s in states:
            mp = fsm.map.get(s, {})
            raw.append({a: num[mp[key]] for a, key in enumerate(sym_key) if key is not None and key in mp})
        acc = frozenset(num[s] for s in fsm.finals)
        live = set(acc)
        changed = True
        while changed:
            changed = False
            for q, row in enumerate(raw):
                if q not in live and any(t in live for t in row.values()):
                    live.add(q)
                    changed = True
        trans = [{a: t for a, t in row.items() if t in live} for row in raw]
        self._trans[k] = trans
        self._event[k] = self._endok[k] = self._badend[k] = acc
        self._keep[k] = frozenset(q for q in live if trans[q])
        self._livemain[k] = frozenset(live)
        self._anchor[k] = {q: q for q in range(len(states))}  # longest match: the lexeme's own state
        self._start0[k] = 0 if 0 in live else -1

    # ------------------------------------------------------------------ public API
    def is_sentence(self, data: bytes) -> bool:
        """lark (basic lexer, LALR, the postlexer) parses the whole text."""
        r = self._sentence_memo.get(data)
        if r is None:
            try:
                self.lark.parse(data.decode("utf-8"), start=self.start)
                r = True
            except (UnicodeDecodeError, LarkError, AssertionError, IndexError):
                r = False
            self._sentence_memo[data] = r
            if len(self._sentence_memo) > self.cache_size:
                self._sentence_memo.popitem(last=False)
        return r

    def is_legal_prefix(self, data: bytes) -> bool:
        self.stats["prefix_queries"] += 1
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return self._legal(text)
        for cut in (1, 2, 3):
            if cut > len(data):
                break
            try:
                head = data[:-cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
            comps = self._completions(data[-cut:])
            return any(self._legal(head + c) for c in comps)
        return False

    def legal_text(self, text: str) -> bool:
        """The same decision on a str (complete code points)."""
        return self._legal(text)

    # ------------------------------------------------------------------ UTF-8 tails
    def _completions(self, tail: bytes) -> list[str]:
        """One code point per character class among the completions of an incomplete UTF-8 tail."""
        r = self._utf8_memo.get(tail)
        if r is not None:
            return r
        lead = tail[0]
        need = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
        out: list[str] = []
        if need > len(tail) and all(0x80 <= b <= 0xBF for b in tail[1:]):
            missing = need - len(tail)
            ranges = []
            for b in range(0x80, 0xC0):
                lo = tail + bytes([b]) + b"\x80" * (missing - 1)
                hi = tail + bytes([b]) + b"\xbf" * (missing - 1)
                try:
                    ranges.append((ord(lo.decode("utf-8")), ord(hi.decode("utf-8"))))
                except UnicodeDecodeError:
                    continue
            if missing == 1 and self.exhaustive_utf8:
                out = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1)]
            else:
                seen: dict[int, str] = {}
                for lo, hi in ranges:
                    i = bisect.bisect_left(self._explicit_sorted, lo)
                    j = bisect.bisect_right(self._explicit_sorted, hi)
                    for cp in self._explicit_sorted[i:j]:
                        seen.setdefault(self._char_sym[chr(cp)], chr(cp))
                    if hi - lo + 1 > j - i and 0 not in seen:
                        cp = lo
                        while chr(cp) in self._explicit:
                            cp += 1
                        seen[0] = chr(cp)
                out = list(seen.values())
        self._utf8_memo[tail] = out
        return out

    # ------------------------------------------------------------------ automata
    def _start(self, k, text, pos):
        return self._start0[k] if self._pike[k] is None else self._pike[k].start(text, pos)

    def _run(self, k, q, text, pos, end=None):
        """Feed text[pos:end] to automaton k from state q: (state or None, first event end, last event end)."""
        trans, ev, cs = self._trans[k], self._event[k], self._char_sym
        first = last = -1
        for p in range(pos, len(text) if end is None else end):
            q = trans[q].get(cs.get(text[p], 0))
            if q is None:
                return None, first, last
            if q in ev:
                last = p + 1
                if first < 0:
                    first = p + 1
        return q, first, last

    def _inconsistent(self, kind, text, detail):
        if len(self.inconsistencies) < 200:
            self.inconsistencies.append((kind, text[-200:], detail))

    # ------------------------------------------------------------------ lexing (lark)
    def _lex_from(self, text, pos):
        out = []
        ts = TextSlice(text, 0, len(text))
        n = len(text)
        match, cbs, index = self._scanner.match, self._callback, self.index
        while pos < n:
            res = match(ts, pos)
            if not res:
                break
            value, type_ = res
            label = type_
            cb = cbs.get(type_)
            if cb is not None:
                label = cb(Token(type_, value)).type
            out.append((pos, pos + len(value), index[type_], label))
            pos += len(value)
        return out, pos

    def _alive(self, k, q):
        return q in self._keep[k] or q in self._livemain[k]

    def _watch(self, text, lexeme):
        """Automata that may still change lark's decision at this lexeme: every terminal ordered
        before it, and its own terminal re-anchored at its end."""
        s, e, t, _label = lexeme
        entries = []
        for k in range(t):
            q0 = self._start(k, text, s)
            if q0 < 0:
                continue
            q, first, _ = self._run(k, q0, text, s)
            if first >= 0 or (q is not None and q in self._badend[k]):
                self._inconsistent("earlier terminal matches", text, f"{self.names[k]} before {self.names[t]} at {s}")
            if q is not None and self._alive(k, q):
                entries.append((k, q))
        anc = self._anchor[t]
        q0 = self._start(t, text, s)
        if q0 >= 0:
            q, _, _ = self._run(t, q0, text, s, e)
            if q is None or q not in self._endok[t]:
                self._inconsistent("own match differs", text, f"{self.names[t]} does not end at {e} (start {s})")
                return tuple(entries)
            q, first, _ = self._run(t, anc[q], text, e)
            if first >= 0 or (q is not None and self._pike[t] is not None and q in self._badend[t]):
                self._inconsistent("own match differs", text,
                                   f"{self.names[t]} at {s}: lark ended at {e}, automaton later")
            if q is not None and self._alive(t, q):
                entries.append((t, q))
        return tuple(entries)

    # ------------------------------------------------------------------ parsing (lark's table)
    def _feed_type(self, stack, typ):
        key = (stack, typ)
        r = self._feed_memo.get(key, _MISSING)
        if r is _MISSING:
            st = ParserState(self._conf, self._plexer, list(stack), [None] * len(stack))
            try:
                st.feed_token(Token(typ, ""))
                r = tuple(st.state_stack)
            except UnexpectedToken:
                r = None
            self._feed_memo[key] = r
        return r

    def _feed_label(self, pst, label, value=""):
        """Feed one (non-ignored) lexeme, through the postlexer if any; None when rejected."""
        stack, paren, levels = pst
        if self._NL is not None:
            if label == self._NL:
                if paren > 0:
                    return pst
                ind = self._ind
                ind.paren_level, ind.indent_level = paren, list(levels)
                try:
                    types = [tk.type for tk in ind.handle_NL(Token(label, value))]
                except (DedentError, IndexError):
                    return None
                levels = tuple(ind.indent_level)
                for ty in types:
                    stack = self._feed_type(stack, ty)
                    if stack is None:
                        return None
                return (stack, paren, levels)
            stack = self._feed_type(stack, label)
            if stack is None:
                return None
            if label in self._open:
                paren += 1
            elif label in self._close:
                paren -= 1
                if paren < 0:
                    return None
            return (stack, paren, levels)
        stack = self._feed_type(stack, label)
        return None if stack is None else (stack, paren, levels)

    def _feed_lexeme(self, pst, lexeme, text):
        if pst is None or self._ignored[lexeme[2]]:
            return pst
        return self._feed_label(pst, lexeme[3], text[lexeme[0]:lexeme[1]])

    def _pstate(self, an, i):
        """Parser state after an.lex[:i] (i >= an.m)."""
        j = i - an.m
        while len(an.pst) <= j:
            an.pst.append(self._feed_lexeme(an.pst[-1], an.lex[an.m + len(an.pst) - 1], an.text))
        return an.pst[j]

    # ------------------------------------------------------------------ analyses
    def _analysis(self, text):
        an = self._cache.get(text)
        if an is not None:
            self._cache.move_to_end(text)
            return an
        base = self._empty
        for n in range(len(text) - 1, max(0, len(text) - 65), -1):
            b = self._cache.get(text[:n])
            if b is not None:
                base = b
                break
        an = self._derive(base, text)
        self._cache[text] = an
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return an

    def _derive(self, b, text):
        """The analysis of text from that of a prefix of it: lexemes before the prefix's first
        watched lexeme are final; lark re-lexes from there."""
        self.stats["analyses"] += 1
        mb = b.m
        pos = b.lex[mb][0] if mb < len(b.lex) else b.lex_end
        new, lex_end = self._lex_from(text, pos)
        lex = b.lex[:mb] + new
        watches = {}
        for j in range(mb, len(lex)):
            w = self._watch(text, lex[j])
            if w:
                watches[j] = w
        m = min(watches) if watches else len(lex)
        pst = b.pst[0]
        for j in range(mb, m):
            pst = self._feed_lexeme(pst, lex[j], text)
        tail = ()
        if lex_end < len(text):
            entries = []
            for k in range(self.n_scan):
                q0 = self._start(k, text, lex_end)
                if q0 < 0:
                    continue
                q, first, _ = self._run(k, q0, text, lex_end)
                if first >= 0 or (q is not None and q in self._badend[k]):
                    self._inconsistent("lark failed where a terminal matches", text, f"{self.names[k]} at {lex_end}")
                if q is not None and self._alive(k, q):
                    entries.append((k, q))
            tail = tuple(entries)
        return _Analysis(text, lex, lex_end, watches, m, pst, tail)

    # ------------------------------------------------------------------ the decision
    def _legal(self, text: str) -> bool:
        an = self._analysis(text)
        n = len(an.lex)
        idx = sorted(an.watches)
        if an.lex_end == len(text):
            if self._pstate(an, n) is not None:
                return True
        else:
            pst = self._pstate(an, n)
            if pst is not None and an.tail:
                prior = self._avoid(e for i in idx for e in an.watches[i])
                if self._try_split(an, n, an.lex_end, an.tail, prior, pst):
                    return True
        for pos in range(len(idx) - 1, -1, -1):
            i = idx[pos]
            pst = self._pstate(an, i)
            if pst is None:
                continue
            prior = self._avoid(e for i2 in idx[:pos] for e in an.watches[i2])
            if self._try_split(an, i, an.lex[i][0], an.watches[i], prior, pst):
                return True
        return False

    def _avoid(self, entries):
        return tuple(e for e in entries if e[1] in self._keep[e[0]])

    def _acceptable(self, pst, X):
        """Labels the lexeme in progress may take (lark's "unless" rule) that the parser accepts,
        and for a Python newline the acceptable indentation outcomes."""
        if self._ignored[X]:
            return None, None  # any label: the lexeme is dropped
        labels = [self.names[X]] + [self.names[u] for u in self._unless[X]]
        ok = set()
        nl = None
        for lab in labels:
            if self._NL is not None and lab == self._NL and pst[1] == 0:
                stack, _paren, levels = pst
                s1 = self._feed_type(stack, self._NL)
                if s1 is None:
                    continue
                ok_indent = self._feed_type(s1, self._INDENT) is not None
                ok_levels = []
                for r, lev in enumerate(levels):
                    s = s1
                    for _ in range(len(levels) - 1 - r):
                        s = self._feed_type(s, self._DEDENT)
                        if s is None:
                            break
                    if s is not None:
                        ok_levels.append(lev)
                if ok_indent or ok_levels:
                    nl = (levels, ok_indent, frozenset(ok_levels))
            elif self._feed_label(pst, lab) is not None:
                ok.add(lab)
        return frozenset(ok), nl

    def _try_split(self, an, i, s, entries, prior, pst):
        """Split A = text[:s] (lexemes lex[:i]), T = text[s:]; entries: automata alive on T."""
        text = an.text
        T = text[s:]
        for pos, (X, q) in enumerate(entries):
            if X >= self.n_scan:
                continue
            if q not in self._livemain[X]:
                continue
            ok, nl = self._acceptable(pst, X)
            if ok is not None and not ok and nl is None:
                continue
            avoid = self._avoid(entries[:pos]) + prior
            lab0 = tuple(self._run(u, self._start(u, text, s), text, s)[0] if self._start(u, text, s) >= 0 else None
                         for u in self._unless[X])
            ind0 = 0
            if nl is not None:
                if "\n" in T:
                    tail = T.rsplit("\n", 1)[1]
                    ind0 = min(tail.count(" ") + tail.count("\t") * self._tab, nl[0][-1] + 1)
                else:
                    ind0 = None
            res = self._search(X, q, avoid, lab0, ok, nl, ind0)
            if res is not None:
                if self.verify:
                    self._verify(an, i, s, X, res)
                return True
        return False

    def _search(self, X, q0, avoid, lab0, ok, nl, ind0):
        """Breadth-first search for u; returns (symbols of u, label) or None."""
        key = (X, q0, avoid, lab0, ok, nl, ind0)
        r = self._search_memo.get(key, _MISSING)
        if r is not _MISSING:
            return r
        self.stats["searches"] += 1
        trans, event, keep, badend, endok = self._trans, self._event, self._keep, self._badend, self._endok
        tX, okX, liveX = trans[X], endok[X], self._livemain[X]
        unl = self._unless[X]
        names = self.names
        sym_indent = self._sym_indent
        cap = nl[0][-1] + 1 if nl is not None else 0

        def success(lab, ind, av):
            if any(st in badend[k] for k, st in av):
                return None
            label = names[X]
            for j, st in enumerate(lab):
                if st is not None and st in endok[unl[j]]:
                    label = names[unl[j]]
                    break
            if ok is None or label in ok:
                return label
            if nl is not None and label == self._NL and ind is not None:
                levels, ok_indent, ok_levels = nl
                if ind > levels[-1]:
                    return label if ok_indent else None
                return label if ind in ok_levels else None
            return None

        start = (q0, avoid, lab0, ind0)
        parent = {start: None}
        dq = deque([start])
        result = None
        while dq:
            node = dq.popleft()
            q, av, lab, ind = node
            if q in okX:
                label = success(lab, ind, av)
                if label is not None:
                    syms = []
                    cur = node
                    while parent[cur] is not None:
                        cur, sym = parent[cur]
                        syms.append(sym)
                    result = (tuple(reversed(syms)), label)
                    break
            for sym, q2 in tX[q].items():
                if q2 not in liveX:
                    continue
                nav = []
                bad = False
                for (k, st) in av:
                    s2 = trans[k][st].get(sym)
                    if s2 is None:
                        continue
                    if s2 in event[k]:
                        bad = True
                        break
                    if s2 in keep[k] or s2 in badend[k]:
                        nav.append((k, s2))
                if bad:
                    continue
                nlab = tuple(None if st is None else trans[unl[j]][st].get(sym) for j, st in enumerate(lab))
                nind = ind
                if nl is not None:
                    eff = sym_indent[sym]
                    if eff == "nl":
                        nind = 0
                    elif ind is not None:
                        nind = min(ind + eff, cap)
                node2 = (q2, tuple(nav), nlab, nind)
                if node2 not in parent:
                    parent[node2] = (node, sym)
                    dq.append(node2)
        self._search_memo[key] = result
        return result

    def _verify(self, an, i, s, X, res):
        """Re-lex text + u with lark from the first unsettled lexeme and compare with the prediction."""
        syms, label = res
        u = "".join(self._rep[a] for a in syms)
        full = an.text + u
        start = an.lex[an.m][0] if an.m < len(an.lex) else an.lex_end
        got, end = self._lex_from(full, min(start, s))
        want = list(an.lex[an.m:i]) + [(s, len(full), X, label)]
        self.stats["witnesses_verified"] += 1
        if end != len(full) or got != want:
            self._inconsistent("witness re-lexed differently", full,
                               f"u={u!r}: lark {[(a, b, self.names[c], d) for a, b, c, d in got]} "
                               f"predicted {[(a, b, self.names[c], d) for a, b, c, d in want]}")
