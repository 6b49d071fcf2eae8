"""Static grammar checks: grammars that would decode nothing fail at compile time.

Without these checks a grammar with an empty language compiles, and the matcher's first
mask allows no token at all (not even EOS): the caller sees a silent dead end. Each check
raises :class:`~.terminals.GrammarCompileError` naming the rule or terminal at fault.

- :func:`missing_start_error`: the start rule is not defined; lists the rules that could
  start (those no other rule uses).
- :func:`check_language`: a terminal that can never match any text (e.g. ``/(?=a)b/``),
  and a start rule that derives no sentence from the terminals the lexer (and the
  indenter, if any) can produce (e.g. ``%declare _INDENT _DEDENT`` without a postlexer).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import lark

from .terminals import GrammarCompileError

__all__ = ["check_language", "missing_start_error", "produced_terminals", "start_candidates"]


def _rule_references(tree) -> set[str]:
    """Names of the rules a rule definition's tree uses (an alias's name is not a use)."""
    from lark.grammar import NonTerminal

    out: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, NonTerminal):
            out.add(node.name)
        elif isinstance(node, lark.Tree):
            kids = node.children[:1] if node.data == "alias" else node.children
            todo.extend(kids)
    return out


def start_candidates(text: str, import_paths: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(rules no other rule uses, all rules) of a grammar, in definition order."""
    from lark.load_grammar import load_grammar

    grammar, _ = load_grammar(text, "<grammar>", list(import_paths), False)
    names = [str(d[0]) for d in grammar.rule_defs]
    used: set[str] = set()
    for name, _params, tree, _opts in grammar.rule_defs:
        used |= _rule_references(tree) - {str(name)}
    return [n for n in names if n not in used and not n.startswith("_")], names


def missing_start_error(text: str, import_paths: Sequence[str], start: str | Sequence[str] | None
                        ) -> GrammarCompileError | None:
    """The error to raise when the grammar has no rule named `start` (lark's default is
    ``start``), else None."""
    try:
        roots, names = start_candidates(text, import_paths)
    except Exception:  # the grammar has other problems: let lark report them
        return None
    wanted = [start] if isinstance(start, str) else list(start or ["start"])
    missing = [s for s in wanted if s not in names]
    if not missing:
        return None
    if not names:  # said "rules that could start: ;"
        return GrammarCompileError(missing[0], "the grammar defines no rules (only terminals or directives); it needs "
                                   "at least its start rule, e.g. `start: ...`", kind="rule")
    shown = roots or names
    more = f" (of {len(names)} rules)" if len(shown) < len(names) else ""
    how = "pass start=NAME (--start NAME)" + (
        "" if start else ", or name it in the grammar with a `// cad_outlines: start=NAME` comment")
    return GrammarCompileError(
        missing[0], f"the grammar has no rule {missing[0]!r}; rules that could start{more}: "
        f"{', '.join(shown[:20])}{', ...' if len(shown) > 20 else ''}; {how}", kind="rule")


def check_language(lk: lark.Lark, spec, start: str | None = None) -> None:
    """Raise :class:`GrammarCompileError` for a terminal that never matches, or a start
    rule that derives no text from the terminals the lexer and indenter can produce."""
    for automaton in spec.automata:
        if not (automaton.label >= 0).any():
            pattern = next((t.pattern.value for t in lk.terminals if t.name == automaton.name), "?")
            raise GrammarCompileError(automaton.name, f"{pattern!r} can never match any text "
                                      "(its language is empty), so the grammar could never use it")
    produced = produced_terminals(lk, spec)
    start = start or lk.options.start[0]
    productive = _productive(lk.rules, produced)
    if start in productive:
        return
    missing = sorted(_unproduced(lk.rules, start, produced, productive))
    declared = [m for m in missing if not any(t.name == m for t in lk.terminals)]
    why = f"it needs {', '.join(missing)}, which no terminal produces" if missing else "its rules never end"
    if declared:
        why += (f" ({', '.join(declared)} {'is' if len(declared) == 1 else 'are'} %declare'd: only a postlexer "
                "makes them; _INDENT/_DEDENT need postlex='python' and a _NEWLINE terminal)")
    dropped = [m for m in missing if m in set(lk.ignore_tokens)]
    if dropped:
        why += (f" ({', '.join(dropped)} {'is' if len(dropped) == 1 else 'are'} %ignore'd: the lexer drops "
                f"{'it' if len(dropped) == 1 else 'them'} before the parser sees {'it' if len(dropped) == 1 else 'them'})")
    raise GrammarCompileError(start, f"the grammar's language is empty: rule {start} derives no text; {why}",
                              kind="rule")


def produced_terminals(lk: lark.Lark, spec) -> set[str]:
    """The terminals the parser can be fed: those the lexer's automata label (and do not drop), and the
    indenter's."""
    produced = {spec.labels[x] for a in spec.automata for x in a.label.tolist() if x >= 0 and x not in spec.ignored}
    postlex = lk.options.postlex
    if getattr(postlex, "NL_type", None):
        produced |= {postlex.INDENT_type, postlex.DEDENT_type}
    return produced


def _productive(rules: Sequence, produced: set[str]) -> set[str]:
    """Rules that derive some text from the `produced` terminals (least fixpoint, by
    worklist: each rule counts its nonterminal occurrences not yet known productive)."""
    need: list[int] = []
    users: dict[str, list[int]] = {}
    todo: list[str] = []
    for i, r in enumerate(rules):
        if any(s.is_term and s.name not in produced for s in r.expansion):
            need.append(-1)  # never productive
            continue
        n = 0
        for s in r.expansion:
            if not s.is_term:
                n += 1
                users.setdefault(s.name, []).append(i)
        need.append(n)
        if n == 0:
            todo.append(r.origin.name)
    productive: set[str] = set()
    while todo:
        name = todo.pop()
        if name in productive:
            continue
        productive.add(name)
        for i in users.get(name, ()):
            need[i] -= 1
            if need[i] == 0:
                todo.append(rules[i].origin.name)
    return productive


def _unproduced(rules: Iterable, start: str, produced: set[str], productive: set[str]) -> set[str]:
    """Terminals, reachable from `start` through unproductive rules, that nothing produces."""
    by_origin: dict[str, list] = {}
    for r in rules:
        by_origin.setdefault(r.origin.name, []).append(r)
    seen, todo, out = {start}, [start], set()
    while todo:
        for r in by_origin.get(todo.pop(), ()):
            for s in r.expansion:
                if s.is_term and s.name not in produced:
                    out.add(s.name)
                elif not s.is_term and s.name not in productive and s.name not in seen:
                    seen.add(s.name)
                    todo.append(s.name)
    return out
