"""Parse tables on which the LALR parser would reduce forever without reading input: refused at compile time.

An LALR parser reads one terminal by reducing until it can shift it. Built without conflicts that always
ends; but lark resolves a reduce/reduce collision by rule priority, and the rule it keeps can leave a cycle
of empty reductions (lark's ``start: (a+)*`` with ``!a.1: "A" |``: on ``A`` or the end, ``a -> <empty>``,
``a+ -> a+ a``, and round again). Such a grammar compiles in lark, and lark's parser (like ours) then loops
forever on the first input that reaches the cycle, growing its stack or its trees.

The check is exact on the tables, not a guess from the grammar: a cyclic grammar (``A =>+ A``) whose
conflicts the priorities resolve the other way parses fine and keeps compiling.

- Only a cyclic grammar can loop (:func:`cyclic_rules`; every other grammar, python.lark included, costs
  one pass over its rules). In an endless run some stack element x is never popped again, and every time
  the run comes back down to x it pushes goto(x, A) for the rule just reduced. From there the run on the
  lookahead t reads only what it pushes above x, so :func:`looping_floors` decides every (x, t, A): the run
  above x stops (shift, accept, error), pops x, or never does (a stack above x repeats, or the same
  (x, t, A) run is needed again above x: the stack grows).
- A looping (x, t, A) is refused only when the parser can reach it: a breadth-first search over real
  parser stacks, feeding the terminals the lexer can produce, finds the shortest terminal sequence whose
  next terminal meets one (:func:`loop_witness`). That witness and the rules the cycle reduces go into
  the :class:`GrammarCompileError`. A search that runs out of its budget refuses nothing; the matcher's
  runtime limits (``Limits.max_reductions_per_token``) still stop a loop it missed.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Collection

from .parse_tables import END, ParseTables
from .terminals import GrammarCompileError

__all__ = ["check_parser_loops", "cyclic_rules", "looping_floors", "loop_witness"]

_STOP, _LOOP = "stop", "loop"
_EBNF_NAME = re.compile(r"^__(.+)_(?:plus|star|opt)_\d+$")  # lark's helper rules for a+, a*: __RULE_plus_N


def cyclic_rules(tables: ParseTables) -> set[str]:
    """The nonterminals that derive themselves (``A =>+ A``: through rules whose other symbols can all be
    empty). Without one no run of reductions is endless: every reduction builds a tree node over the same
    input, and nested nodes over the same text repeat a nonterminal only in a cyclic grammar."""
    lhs_of = {lhs for lhs, _ in tables.rules}
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for (lhs, _), rhs in zip(tables.rules, tables.rule_rhs):
            if lhs not in nullable and all(s in nullable for s in rhs):
                nullable.add(lhs)
                changed = True
    edges: dict[str, set[str]] = {}
    for (lhs, _), rhs in zip(tables.rules, tables.rule_rhs):
        for i, sym in enumerate(rhs):
            if sym in lhs_of and all(o in nullable for j, o in enumerate(rhs) if j != i):
                edges.setdefault(lhs, set()).add(sym)
    out = set()
    for a in edges:  # a is cyclic iff it reaches itself
        todo, seen = list(edges[a]), set()
        while todo:
            b = todo.pop()
            if b == a:
                out.add(a)
                break
            if b not in seen:
                seen.add(b)
                todo.extend(edges.get(b, ()))
    return out


def looping_floors(tables: ParseTables) -> set[tuple[int, str, str]]:
    """Every (state x, terminal t, nonterminal A) such that once a reduction by an A rule on lookahead t has
    popped down to x, the parser never pops x again and never stops: the run above x repeats a stack, or
    needs its own run again above x (the stack grows). Empty for a grammar that is not cyclic."""
    if not cyclic_rules(tables):
        return set()
    rules, actions, goto = tables.rules, tables.actions, tables.goto
    memo: dict[tuple[int, str, str], object] = {}
    busy: set[tuple[int, str, str]] = set()

    def on_top(y: int, t: str):
        """The run on t from a stack whose top is y, as far as it stays at or above y."""
        act = actions[y].get(t)
        if act is None or act[0]:
            return _STOP
        lhs, n = rules[act[1]]
        return (act[1], n - 1) if n else above(y, t, lhs)

    def above(x: int, t: str, nt: str):
        """The run on t after goto(x, nt) is pushed on x: "stop", "loop", or (rule, n): a reduction by
        `rule` pops x and n more below it."""
        key = (x, t, nt)
        if key in memo:
            return memo[key]
        if key in busy:  # this same run is needed again above x: the stack grows without end
            return _LOOP
        busy.add(key)
        top, seen = goto[x].get(nt), set()
        while True:
            if top is None or (t == END and top == tables.end_state):
                out = _STOP  # no goto (error), or the start rule reduced on the end (accept)
                break
            if top in seen:  # the element above x repeats: the same stacks over and over
                out = _LOOP
                break
            seen.add(top)
            inner = on_top(top, t)
            if not isinstance(inner, tuple):
                out = inner
                break
            rule, more = inner
            if more:
                out = (rule, more - 1)
                break
            top = goto[x].get(rules[rule][0])
        busy.discard(key)
        memo[key] = out
        return out

    for x in actions:
        for nt, y in goto[x].items():
            for t, (shift, _) in actions[y].items():
                if not shift:
                    above(x, t, nt)
    return {key for key, out in memo.items() if out == _LOOP}


def _feed(tables: ParseTables, stack: list[int], t: str, looping: Collection[tuple[int, str, str]],
          trace: list[int] | None = None, max_steps: int = 1 << 20) -> str | list[int]:
    """Feed terminal `t` to the parser at `stack` (not changed): the stack after the shift, ``"accept"``,
    ``"error"``, or ``"loop"`` once a reduction pops down to a looping floor (or after `max_steps`
    reductions). `trace` collects the rules reduced."""
    rules, actions, goto = tables.rules, tables.actions, tables.goto
    stack = list(stack)
    for _ in range(max_steps):
        act = actions[stack[-1]].get(t)
        if act is None:
            return "error"
        if act[0]:
            return stack + [act[1]]
        lhs, n = rules[act[1]]
        if trace is not None:
            trace.append(act[1])
        if n:
            del stack[-n:]
        if (stack[-1], t, lhs) in looping:
            return "loop"
        nxt = goto[stack[-1]].get(lhs)
        if nxt is None:
            return "error"
        if t == END and nxt == tables.end_state:
            return "accept"
        stack.append(nxt)
    return "loop"


def loop_witness(tables: ParseTables, looping: Collection[tuple[int, str, str]], terminals: Collection[str],
                 budget: int = 20_000) -> tuple[list[str], str] | None:
    """The shortest (terminals fed, next terminal) after which the parser meets a looping floor, searched
    breadth first over parser stacks feeding only `terminals` (and the end); None if none is found within
    `budget` feeds."""
    if not looping:
        return None
    wanted = set(terminals) | {END}
    start = (tables.start_state,)
    queue: deque[tuple[tuple[int, ...], tuple[str, ...]]] = deque([(start, ())])
    seen = {start}
    while queue and budget > 0:
        stack, fed = queue.popleft()
        for t in sorted(tables.actions[stack[-1]]):
            if t not in wanted:
                continue
            budget -= 1
            after = _feed(tables, list(stack), t, looping)
            if after == "loop":
                return list(fed), t
            if isinstance(after, list) and t != END:
                key = tuple(after)
                if key not in seen:
                    seen.add(key)
                    queue.append((key, fed + (t,)))
    return None


def _shown(tables: ParseTables, rule: int) -> str:
    lhs = tables.rules[rule][0]
    rhs = " ".join(tables.rule_rhs[rule]) or "<empty>"
    return f"{lhs} -> {rhs}"


def _user_rule(name: str) -> tuple[str, str]:
    """(the grammar's own rule, how to show `name`): lark's helper rule ``__start_plus_0`` for an ``x+`` in
    rule start is (``start``, ``the repetition __start_plus_0 in start``)."""
    m = _EBNF_NAME.match(name)
    return (m.group(1), f"the repetition {name} in {m.group(1)}") if m else (name, name)


def check_parser_loops(tables: ParseTables, terminals: Collection[str]) -> None:
    """Raise :class:`GrammarCompileError` (``kind="rule"``) naming the rules of a cycle of reductions that
    the parser can reach (feeding `terminals`, the ones the lexer and postlexer produce) and never leave."""
    looping = looping_floors(tables)
    witness = loop_witness(tables, looping, terminals)
    if witness is None:
        return
    fed, t = witness
    stack = [tables.start_state]
    for term in fed:
        after = _feed(tables, stack, term, ())
        assert isinstance(after, list), "the witness was found by feeding these terminals"
        stack = after
    trace: list[int] = []
    _feed(tables, stack, t, (), trace, max_steps=4096)
    cycle = list(dict.fromkeys(trace[-len(tables.rules) * 2:]))  # the rules reduced once the run repeats
    owners = list(dict.fromkeys(_user_rule(tables.rules[r][0]) for r in cycle))
    names = [shown for _, shown in owners]
    where = f"after {' '.join(fed)}" if fed else "at the start"
    raise GrammarCompileError(
        owners[0][0], f"the parser would reduce forever without reading input ({where}, on {t}: "
        f"{'; '.join(_shown(tables, r) for r in cycle)}, over and over; lark's LALR parser loops there too): "
        f"{', '.join(names)} {'derives itself' if len(names) == 1 else 'derive themselves'} through rules that "
        "read nothing, and a rule priority kept that cycle where it resolved a reduce/reduce collision; make the "
        "cycle's empty or single-symbol alternative unreachable there", kind="rule")
