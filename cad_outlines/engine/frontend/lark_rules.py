"""A Lark grammar's terminals and BNF rules, compiled by hand, equal to lark's.

``lark.load_grammar.load_grammar(...).compile(...)`` spends most of its ~90 ms on
python.lark in lark's generic tree machinery (a Python LALR parse of the text, visitors
that look each handler up by name, deep copies of every tree). This module computes the
same result over the same trees with direct code:

- :mod:`.lark_syntax` parses the text (and each ``%import``ed file, once per process);
- the statements are gathered as lark's ``GrammarBuilder`` does (imports with their name
  mangling, ``%ignore``, ``%declare``, terminal references inlined);
- terminals become patterns and rules become BNF with lark's own handlers
  (``PrepareAnonTerminals``, ``EBNF_to_BNF``, ``TerminalTreeToPattern``), called in the
  order lark's in-place transformers call them, since that order names the anonymous
  terminals (``__ANON_0``) and the rules that EBNF creates (``__expr_star_0``).

Exactness is the contract: terminals (names, patterns, priorities, order) and rules
(origin, expansion, order, alias, options) equal lark's. Whatever this module does not
implement (``%override``, ``%extend``, import loaders other than paths and
lark's own, a lark other than 1.3) and every grammar lark rejects make
:func:`compile_lark_rules` return None, and the caller asks lark, which then compiles or
raises its own error. ``tests/engine/frontend/test_lark_rules.py`` checks equality on every grammar file
and on random grammars.
"""

from __future__ import annotations

import os
import sys
import threading
from copy import copy, deepcopy

import lark
import lark.load_grammar as _lg
from lark.grammar import NonTerminal, Rule, RuleOptions, Symbol, Terminal
from lark.lexer import PatternRE, TerminalDef, Token
from lark.tree import SlottedTree as ST
from lark.tree import Tree
from lark.utils import OrderedSet

from .lark_syntax import parse_grammar_text

__all__ = ["compile_lark_rules"]

_SUPPORTED = lark.__version__.startswith("1.3.")
_EMPTY = _lg._EMPTY
_TOKEN_DEFAULT_PRIORITY = 0

_PARSED: dict[str, Tree | None] = {}  # imported file's text -> its parse tree
_PARSED_LOCK = threading.Lock()


class _Fallback(Exception):
    """Not handled here (a construct not implemented, or an error lark reports)."""


def _parse_imported(text: str) -> Tree:
    """An imported file's parse tree, parsed once per process and text (never mutated:
    definitions are copied as their names are mangled)."""
    with _PARSED_LOCK:
        if text not in _PARSED:
            _PARSED[text] = parse_grammar_text(text)
        tree = _PARSED[text]
    if tree is None:
        raise _Fallback
    return tree


def _iter_subtrees(tree: Tree) -> list[Tree]:
    """``Tree.iter_subtrees`` (deepest level first, left to right; each node once)."""
    queue = [tree]
    seen: dict[int, Tree] = {}
    for sub in queue:
        seen[id(sub)] = sub
        queue += [c for c in reversed(sub.children) if isinstance(c, Tree) and id(c) not in seen]
    out = list(seen.values())
    out.reverse()
    return out


def _rename(tree: Tree, mangle) -> Tree:
    """A copy of a definition's tree with every symbol renamed (``_mangle_definition_tree``)."""
    kids = []
    for c in tree.children:
        if isinstance(c, Tree):
            kids.append(_rename(c, mangle))
        elif isinstance(c, Symbol):
            kids.append(c.renamed(mangle))
        else:
            kids.append(c)
    return type(tree)(tree.data, kids)


# -- gathering the definitions (lark's GrammarBuilder) -----------------------------------


class _Definition:
    __slots__ = ("is_term", "tree", "params", "options")

    def __init__(self, is_term: bool, tree, options, params: tuple = ()):
        self.is_term = is_term
        self.tree = tree
        self.params = params
        self.options = options


class _Builder:
    """Definitions in lark's order: imported ones first, then the file's statements."""

    def __init__(self, import_paths: list):
        self.import_paths = import_paths
        self.defs: dict[str, _Definition] = {}
        self.ignore_names: list[str] = []

    def define(self, name: str, is_term: bool, tree, options, params: tuple = ()) -> None:
        if name in self.defs or name.startswith("__"):
            raise _Fallback
        self.defs[name] = _Definition(is_term, tree, options, params)

    def load(self, tree: Tree, grammar_name, mangle) -> None:
        imports: dict = {}
        for stmt in tree.children:
            if stmt.data == "import":
                dotted, base, aliases = self.unpack_import(stmt, grammar_name)
                if dotted in imports:
                    if imports[dotted][0] != base:
                        raise _Fallback
                    imports[dotted][1].update(aliases)
                else:
                    imports[dotted] = base, aliases
        for dotted, (base, aliases) in imports.items():
            self.do_import(dotted, base, aliases, mangle)

        for stmt in tree.children:
            data = stmt.data
            if data == "rule":
                mods, name, params, prio, exp = stmt.children
                params = tuple(t.value for t in params.children)
                keep_all = expand1 = False
                if mods.children:
                    m = mods.children[0]
                    expand1 = "?" in m
                    keep_all = "!" in m
                    if expand1 and name.startswith("_"):
                        raise _Fallback
                priority = int(prio.children[0]) if prio.children else None
                options = RuleOptions(keep_all, expand1, priority=priority, template_source=name if params else None)
                if mangle is not None:
                    name, exp, params = mangle(name), _rename(exp, mangle), tuple(map(mangle, params))
                self.define(name, False, exp, options, params)
            elif data == "term":
                name = stmt.children[0].value
                priority = int(stmt.children[1]) if len(stmt.children) == 3 else _TOKEN_DEFAULT_PRIORITY
                exp = stmt.children[-1]
                if mangle is not None:
                    name, exp = mangle(name), _rename(exp, mangle)
                self.define(name, True, exp, priority)
            elif data == "ignore":
                if mangle is None:
                    self.ignore(stmt.children[0])
            elif data == "declare":
                for sym in stmt.children:
                    name = sym.name if mangle is None else mangle(sym.name)
                    self.define(name, sym.is_term, None, 1 if sym.is_term else RuleOptions())
            elif data != "import":
                raise _Fallback  # %override, %extend

        _resolve_term_references({n: d.tree for n, d in self.defs.items() if d.is_term})

    def ignore(self, t: Tree) -> None:
        if len(t.children) == 1:
            t2 = t.children[0]
            if t2.data == "expansion" and len(t2.children) == 1:
                item = t2.children[0]
                if item.data == "value" and isinstance(item.children[0], Terminal):
                    self.ignore_names.append(item.children[0].name)
                    return
        name = "__IGNORE_%d" % len(self.ignore_names)
        self.ignore_names.append(name)
        self.defs[name] = _Definition(True, t, _TOKEN_DEFAULT_PRIORITY)

    @staticmethod
    def unpack_import(stmt: Tree, grammar_name):
        """(dotted path, base path, aliases) of an ``%import`` (lark's ``_unpack_import``)."""
        if len(stmt.children) > 1:
            path_node, arg1 = stmt.children
        else:
            (path_node,), arg1 = stmt.children, None
        if isinstance(arg1, Tree):
            dotted = tuple(path_node.children)
            aliases = dict(zip(arg1.children, arg1.children))
        else:
            dotted = tuple(path_node.children[:-1])
            if not dotted:
                raise _Fallback  # "Nothing was imported"
            name = path_node.children[-1]
            aliases = {name.value: (arg1 or name).value}
        if path_node.data == "import_lib":
            base = None
        else:
            if grammar_name == "<string>":
                try:
                    base_file = os.path.abspath(sys.modules["__main__"].__file__)
                except AttributeError:
                    base_file = None
            else:
                base_file = grammar_name
            if base_file:
                if isinstance(base_file, _lg.PackageResource):
                    base = _lg.PackageResource(base_file.pkg_name, os.path.split(base_file.path)[0])
                else:
                    base = os.path.split(base_file)[0]
            else:
                base = os.path.abspath(os.path.curdir)
        return dotted, base, aliases

    def do_import(self, dotted: tuple, base, aliases: dict, base_mangle) -> None:
        mangle = _lg._get_mangle("__".join(dotted), aliases, base_mangle)
        grammar_path = os.path.join(*dotted) + _lg.EXT
        to_try = self.import_paths + ([base] if base is not None else []) + [_lg.stdlib_loader]
        for source in to_try:
            try:
                if source is _lg.stdlib_loader:
                    joined, text = source(base, grammar_path)
                elif callable(source):
                    raise _Fallback  # a user's loader: lark calls it
                else:
                    joined = os.path.join(source, grammar_path)
                    with open(joined, encoding="utf8") as f:
                        text = f.read()
            except OSError:
                continue
            sub = _Builder(self.import_paths)
            sub.load(_parse_imported(text), joined, mangle)
            sub.remove_unused([mangle(a) for a in aliases])
            for name in sub.defs:
                if name in self.defs:
                    raise _Fallback
            self.defs.update(sub.defs)
            return
        raise _Fallback  # not found: lark raises

    def remove_unused(self, used: list[str]) -> None:
        keep, todo = set(used), list(used)
        while todo:
            d = self.defs.get(todo.pop())
            if d is None or d.is_term:
                continue
            for s in _used_symbols(d.tree) - set(d.params):
                if s not in keep:
                    keep.add(s)
                    todo.append(s)
        self.defs = {k: v for k, v in self.defs.items() if k in keep}

    def validate(self) -> None:
        defs = self.defs
        for d in defs.values():
            params = d.params
            if len(set(params)) != len(params) or any(p in defs for p in params):
                raise _Fallback
            if d.tree is None:
                continue
            for t in _used_symbols(d.tree, templates=True):
                if isinstance(t, str):
                    if t not in defs and t not in params:
                        raise _Fallback
                elif t.children[0].name not in params:  # a template's use
                    sym = t.children[0].name
                    if sym not in defs or len(t.children) - 1 != len(defs[sym].params):
                        raise _Fallback
        if not set(self.ignore_names) <= defs.keys():
            raise _Fallback


def _used_symbols(tree: Tree, templates: bool = False) -> set:
    """Names of the symbols under the tree's ``expansion`` nodes (``_find_used_symbols``),
    and with `templates` its ``template_usage`` nodes too."""
    out: set = set()
    todo = [(tree, False)]
    seen: set[int] = set()
    while todo:
        t, under = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.data == "expansion":
            under = True
        elif templates and t.data == "template_usage":
            out.add(t)
        for c in t.children:
            if isinstance(c, Tree):
                todo.append((c, under))
            elif under and isinstance(c, Symbol):
                out.add(c.name)
    return out


def _resolve_term_references(terms: dict) -> None:
    """Inline the terminals a terminal uses, in place (lark's ``resolve_term_references``)."""
    refs: dict[str, list] = {}
    for name, tree in terms.items():
        if tree is None:
            continue
        found = refs[name] = []
        todo = [tree]
        while todo:
            t = todo.pop()
            for c in t.children:
                if isinstance(c, Tree):
                    if c.data == "value" and isinstance(c.children[0], Symbol):
                        if c.children[0].is_term:
                            found.append(c)
                        else:
                            raise _Fallback  # a rule in a terminal
                    else:
                        todo.append(c)
    # lark substitutes until nothing changes and then rejects a terminal that contains
    # itself: the same as rejecting any cycle of references
    state: dict[str, int] = {}
    for root in refs:
        stack = [(root, iter(refs[root]))]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            node = next(it, None)
            if node is None:
                state[name] = 2
                stack.pop()
                continue
            ref = node.children[0].name
            if terms.get(ref) is None:
                raise _Fallback  # undefined or only declared
            mark = state.get(ref)
            if mark == 1:
                raise _Fallback  # recursion in a terminal
            if mark is None:
                state[ref] = 1
                stack.append((ref, iter(refs[ref])))
    for found in refs.values():
        for node in found:
            node.children[0] = terms[node.children[0].name]


# -- terminals -----------------------------------------------------------------------------

_TO_PATTERN = _lg.TerminalTreeToPattern()


def _literal_pattern(tok: Token, memo: dict):
    """``_literal_to_pattern``, remembered per literal text within one compile."""
    key = (tok.type, tok.value)
    p = memo.get(key)
    if p is None:
        p = memo[key] = _lg._literal_to_pattern(tok)
    return p


def _range_pattern(a: Token, b: Token) -> PatternRE:
    """``PrepareLiterals.range``."""
    if a.type != "STRING" or b.type != "STRING":
        raise _Fallback
    start, end = a.value[1:-1], b.value[1:-1]
    if len(_lg.eval_escaping(start)) != 1 or len(_lg.eval_escaping(end)) != 1:
        raise _Fallback
    return PatternRE("[%s-%s]" % (start, end))


def _term_pattern(node, memo: dict):
    """A terminal's tree as one pattern (``PrepareLiterals * TerminalTreeToPattern``)."""
    if not isinstance(node, Tree):
        raise _Fallback  # a symbol left in a terminal
    data, kids = node.data, node.children
    if data == "expansions":
        return _TO_PATTERN.expansions([_term_pattern(c, memo) for c in kids])
    if data == "expansion":
        return _TO_PATTERN.expansion([_term_pattern(c, memo) for c in kids])
    if data == "value":
        return _term_pattern(kids[0], memo)
    if data == "literal":
        return _literal_pattern(kids[0], memo)
    if data == "expr":
        return _TO_PATTERN.expr([_term_pattern(kids[0], memo), *kids[1:]])
    if data == "maybe":
        return _TO_PATTERN.maybe([_term_pattern(kids[0], memo)])
    if data == "range":
        return _range_pattern(*kids)
    raise _Fallback  # an alias in a terminal


# -- rules ---------------------------------------------------------------------------------


def _prepare(node: Tree, memo: dict) -> Tree:
    """``PrepareLiterals * ValidateSymbols`` in place: literals and ranges become
    ``pattern`` nodes, ``value`` nodes their content."""
    kids = node.children
    for i, c in enumerate(kids):
        if not isinstance(c, Tree):
            continue
        if c.data == "value":
            c = c.children[0]
            if not isinstance(c, Tree):
                kids[i] = c
                continue
        if c.data == "literal":
            kids[i] = ST("pattern", [_literal_pattern(c.children[0], memo)])
        elif c.data == "range":
            kids[i] = ST("pattern", [_range_pattern(*c.children)])
        else:
            kids[i] = _prepare(c, memo)
    return node


def _in_place(tree: Tree, handlers: dict, order: list[Tree] | None = None) -> Tree:
    """Lark's ``Transformer_InPlace`` for the given handlers: each node's children are
    replaced, deepest level first, left to right (`order`, from :func:`_iter_subtrees`),
    and the root last."""
    for sub in _iter_subtrees(tree) if order is None else order:
        kids = sub.children
        for i, c in enumerate(kids):
            if isinstance(c, Tree):
                h = handlers.get(c.data)
                if h is not None:
                    kids[i] = h(*c.children)
    h = handlers.get(tree.data)
    return h(*tree.children) if h is not None else tree


class _Templates:
    """``ApplyTemplates``: each use of a template (``sep{item, ","}``) becomes a rule of its
    own, named after the use and added to the rule list, the first time it is seen."""

    def __init__(self, rule_defs: list):
        self.rule_defs = rule_defs
        self.defined = any(params for _n, params, _t, _o in rule_defs)
        self.replacer = _lg._ReplaceSymbols()
        self.replace_handlers = {"value": lambda *c: self.replacer.value(list(c)),
                                 "template_usage": lambda *c: self.replacer.template_usage(list(c))}
        self.created: set[str] = set()

    def use(self, template: NonTerminal, *args) -> NonTerminal:
        name = template.name
        result = "%s{%s}" % (name, ",".join(a.name for a in args))
        if result not in self.created:
            self.created.add(result)
            (_n, params, tree, options), = (t for t in self.rule_defs if t[0] == name)
            if len(params) != len(args):
                raise _Fallback
            tree = deepcopy(tree)
            self.replacer.names = dict(zip(params, args))
            _in_place(tree, self.replace_handlers)
            self.rule_defs.append((result, (), tree, deepcopy(options)))
        return NonTerminal(result)


def _flatten(tree: Tree, data: str) -> None:
    """Children labelled `data` replaced by their children, recursively (lark repeats
    ``expand_kids_by_data`` until nothing changes: the same list)."""
    kids = tree.children
    for c in kids:
        if isinstance(c, Tree) and c.data == data:
            break
    else:
        return
    out: list = []

    def add(children):
        for c in children:
            if isinstance(c, Tree) and c.data == data:
                add(c.children)
            else:
                out.append(c)

    add(kids)
    tree.children = out


class _Simplify:
    """``SimplifyRule_Visitor``: nested alternatives distributed, duplicates dropped.

    Lark visits every node of a tree again each time a distribution builds a new
    alternative around it. A node whose handler has run is a fixed point (visiting it again
    changes nothing) except an ``expansion`` that distributed: it is now an ``expansions``
    whose alternatives may repeat, and the next visit removes the repeats. So each visit
    here goes only to the nodes not yet fixed (the others and their subtrees are), children
    before parents; the handlers have no effect beyond their node, so the result is lark's.
    """

    def __init__(self):
        self.fixed: dict[int, Tree] = {}  # id -> node (kept alive so ids stay unique)

    def visit(self, tree: Tree) -> None:
        fixed = self.fixed
        order: list[Tree] = []
        seen: set[int] = set()
        stack: list = [tree]
        while stack:
            node = stack.pop()
            if node.__class__ is tuple:  # (node,): its children are done
                order.append(node[0])
                continue
            if id(node) in seen or id(node) in fixed:
                continue
            seen.add(id(node))
            stack.append((node,))
            stack.extend(c for c in node.children if isinstance(c, Tree))
        for sub in order:
            data = sub.data
            if data == "expansion":
                if self.expansion(sub):
                    continue  # distributed: not fixed yet
            elif data == "expansions":
                self.expansions(sub)
            elif data == "alias":
                self.alias(sub)
            fixed[id(sub)] = sub

    def expansion(self, tree: Tree) -> bool:
        """Flatten; distribute over the first ``expansions`` child (True if it did)."""
        _flatten(tree, "expansion")
        for i, child in enumerate(tree.children):
            if isinstance(child, Tree) and child.data == "expansions":
                tree.data = "expansions"
                alts = []
                for option in dict.fromkeys(child.children):
                    new = ST("expansion", [option if i == j else other for j, other in enumerate(tree.children)])
                    self.visit(new)
                    alts.append(new)
                tree.children = alts
                _flatten(tree, "expansions")
                return True
        return False

    @staticmethod
    def alias(tree: Tree) -> None:
        rule, alias_name = tree.children
        if rule.data == "expansions":
            tree.data = "expansions"
            tree.children = [ST("alias", [child, alias_name]) for child in rule.children]

    @staticmethod
    def expansions(tree: Tree) -> None:
        _flatten(tree, "expansions")
        if len(set(tree.children)) != len(tree.children):
            tree.children = list(dict.fromkeys(tree.children))


def _rule_expansions(tree: Tree) -> list[tuple[list, str | None]]:
    """``RuleTreeToText``: (symbols, alias) per alternative of a simplified rule."""
    if tree.data != "expansions":
        raise _Fallback
    out = []
    for alt in tree.children:
        if not isinstance(alt, Tree):
            raise _Fallback
        if alt.data == "alias":
            exp, name = alt.children
            if not isinstance(exp, Tree) or exp.data != "expansion":
                raise _Fallback
            out.append((list(exp.children), name.name))
        elif alt.data == "expansion":
            out.append((list(alt.children), None))
        else:
            raise _Fallback
    return out


def _compile(builder: _Builder, start: list[str], terminals_to_keep) -> tuple[list, list, list]:
    """Lark's ``Grammar.compile`` over the gathered definitions."""
    memo: dict = {}
    term_defs = [(n, d) for n, d in builder.defs.items() if d.is_term]
    rule_defs = [(n, d.params, d.tree, d.options) for n, d in builder.defs.items() if not d.is_term]

    terminals = []
    for name, d in term_defs:
        if d.tree is None:
            continue
        exps = d.tree.children  # lark: the tree's only "expansion" node is empty
        if len(exps) == 1 and exps[0].data == "expansion" and not exps[0].children:
            raise _Fallback  # "Terminals cannot be empty"
        terminals.append(TerminalDef(name, _term_pattern(d.tree, memo), d.options))

    anon = _lg.PrepareAnonTerminals(terminals)
    ebnf = _lg.EBNF_to_BNF()
    anon_handlers = {"pattern": anon.pattern}
    ebnf_handlers = {"expr": ebnf.expr, "maybe": ebnf.maybe}
    templates = _Templates(rule_defs)
    template_handlers = {"template_usage": templates.use}
    rules = []
    i = 0
    while i < len(rule_defs):  # grows as templates are used
        name, params, tree, options = rule_defs[i]
        i += 1
        if params:
            continue
        rule_options = RuleOptions(keep_all_tokens=True) if options and options.keep_all_tokens else None
        ebnf.rule_options = rule_options
        ebnf.prefix = name
        anon.rule_options = rule_options
        # the three passes see the same nodes in the same order: each replaces leaves only
        tree = _prepare(tree, memo)
        order = _iter_subtrees(tree)
        tree = _in_place(tree, anon_handlers, order)
        if templates.defined:
            tree = _in_place(tree, template_handlers, order)
        rules.append((name, _in_place(tree, ebnf_handlers, order), options))
    rules += ebnf.new_rules
    if len(rules) != len({name for name, _t, _o in rules}):
        raise _Fallback

    simplify = _Simplify()
    compiled: list[Rule] = []
    for name, tree, options in rules:
        simplify.visit(tree)
        for i, (expansion, alias) in enumerate(_rule_expansions(tree)):
            if alias and name.startswith("_"):
                raise _Fallback
            empty_indices = tuple(x == _EMPTY for x in expansion)
            if any(empty_indices):
                exp_options = copy(options) or RuleOptions()
                exp_options.empty_indices = empty_indices
                expansion = [x for x in expansion if x != _EMPTY]
            else:
                exp_options = options
            keep_all = exp_options and exp_options.keep_all_tokens
            for sym in expansion:
                if not isinstance(sym, Symbol):
                    raise _Fallback
                if keep_all and sym.is_term:
                    sym.filter_out = False
            compiled.append(Rule(NonTerminal(name), expansion, i, alias, exp_options))

    if len(set(compiled)) != len(compiled):
        groups: dict = {}
        for r in compiled:
            groups.setdefault(r, []).append(r)
        for dups in groups.values():
            if len(dups) > 1 and (dups[0].expansion
                                  or len({(r.alias, r.order, r.options) for r in dups}) != len(dups)):
                raise _Fallback  # "Rules defined twice"
        compiled = list(OrderedSet(compiled))

    while True:  # drop rules no other rule uses, until none is dropped
        c = len(compiled)
        used = {s.name for r in compiled for s in r.expansion if not s.is_term and s.name != r.origin.name}
        used.update(start)
        compiled = [r for r in compiled if r.origin.name in used]
        if len(compiled) == c:
            break

    if terminals_to_keep != "*":
        used_terms = {t.name for r in compiled for t in r.expansion if isinstance(t, Terminal)}
        terminals = [t for t in terminals
                     if t.name in used_terms or t.name in builder.ignore_names or t.name in terminals_to_keep]
    return terminals, compiled, builder.ignore_names


def compile_lark_rules(text: str, import_paths: list, start: list[str], terminals_to_keep=frozenset()
                       ) -> tuple[list[TerminalDef], list[Rule], list[str]] | None:
    """(terminals, rules, ignored terminal names) of a grammar text, equal to
    ``load_grammar(text, "<string>", import_paths, False)[0].compile(start, terminals_to_keep)``;
    None where lark must do it (a construct not implemented here, or an error to report)."""
    if not _SUPPORTED:
        return None
    tree = parse_grammar_text(text)
    if tree is None:
        return None
    try:
        builder = _Builder(list(import_paths))
        builder.load(tree, "<string>", None)
        builder.validate()
        return _compile(builder, start, terminals_to_keep)
    except _Fallback:
        return None
    except Exception:  # an assertion or visit error inside lark's handlers: lark reports it
        return None
