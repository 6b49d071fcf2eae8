"""The package's import graph: no cycle between modules, and no arrow from a lower stage to a higher one
(grammar front end -> lexer and mask store -> compiled handle -> matcher -> decoding -> generators and serving,
which do not import each other; edit programs stand alone). Read with `ast`, so nothing is imported."""

import ast
from pathlib import Path

import cad_outlines

PKG = Path(cad_outlines.__file__).parent

# Each module's layer (longest matching prefix wins). A module may import its own layer or lower ones.
LAYERS = {
    "cad_outlines.errors": 0,
    "cad_outlines._version": 0,
    "cad_outlines.limits": 0,
    "cad_outlines._native": 0,
    "cad_outlines.grammars": 0,
    "cad_outlines.edits": 1,
    "cad_outlines.engine.frontend": 1,
    "cad_outlines.engine.store": 2,
    "cad_outlines.engine": 3,  # compile driver, compiled handle, matcher, vocabulary, token ids
    "cad_outlines.engine.reference": 4,  # test references: above everything they check
    "cad_outlines.grammar_report": 5,
    "cad_outlines.decoding": 6,  # what the in-process loops and the vLLM client share
    "cad_outlines.generators": 7,
    "cad_outlines.serving": 7.4,  # its facade; below it, one way: http -> editing -> constraints -> shared
    "cad_outlines.serving.limits": 7,
    "cad_outlines.serving.tokenizer": 7,
    "cad_outlines.serving.constraints": 7.1,
    "cad_outlines.serving.editing": 7.2,
    "cad_outlines.serving.http": 7.3,
    "cad_outlines.examples": 7,
    "cad_outlines.cli_common": 7,
    "cad_outlines.demo": 8,
    "cad_outlines.edit_cli": 8,
    "cad_outlines.cli": 9,
    "cad_outlines": 10,  # the facade re-exports everything
}
# Same layer, no arrows between them: what both need lives in cad_outlines.decoding.
SIBLINGS = [("cad_outlines.generators", "cad_outlines.serving")]
# Edit programs stand alone: they import only errors and themselves.
STANDALONE = {"cad_outlines.edits": {"cad_outlines.edits", "cad_outlines.errors"}}
# Nothing in production imports the references.
PRODUCTION_MAY_NOT_IMPORT = "cad_outlines.engine.reference"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(mod: str) -> tuple[str, int]:
    """The layer of a module; every module must have one (the facade's key matches only itself)."""
    keys = [k for k in LAYERS if mod == k or (k != "cad_outlines" and mod.startswith(k + "."))]
    assert keys, f"{mod} has no layer in tests/test_import_graph.py LAYERS: say where it sits in the stages"
    best = max(keys, key=len)
    return best, LAYERS[best]


def _within(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def _type_checking_block(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, mod: str, is_pkg: bool) -> set[str]:
    """Modules of the package that `path` imports at run time (imports for type hints only are skipped)."""
    pkg = mod if is_pkg else mod.rsplit(".", 1)[0]
    out: set[str] = set()
    skip: set[int] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking_block(node):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("cad_outlines"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("cad_outlines"):
                continue
            for a in node.names:  # `from pkg import module` imports the module
                sub = f"{target}.{a.name}"
                out.add(sub if _exists(sub) else target)
    return out


def _exists(mod: str) -> bool:
    p = PKG.parent / mod.replace(".", "/")
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in PKG.rglob("*.py"):
        mod = _module_name(path)
        graph[mod] = {m for m in _imports(path, mod, path.name == "__init__.py") if m != mod}
    return graph


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if n not in graph:
                continue
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_arrows_point_down():
    bad = []
    for mod, deps in _graph().items():
        if mod == "cad_outlines" or mod.endswith("__main__"):
            continue
        layer_name, layer = _layer(mod)
        for dep in deps:
            if dep == "cad_outlines":
                bad.append(f"{mod} imports the package facade")
                continue
            dep_name, dep_layer = _layer(dep)
            if dep_layer > layer and not dep.startswith(mod + "."):
                bad.append(f"{mod} (layer {layer_name}) imports {dep} (layer {dep_name}, higher)")
            for stand, allowed in STANDALONE.items():
                if (mod == stand or mod.startswith(stand + ".")) and not any(
                        dep == a or dep.startswith(a + ".") for a in allowed):
                    bad.append(f"{mod} (edit programs stand alone) imports {dep}")
            for a, b in SIBLINGS:
                for src, dst in ((a, b), (b, a)):
                    if _within(mod, src) and _within(dep, dst):
                        bad.append(f"{mod} imports its sibling {dep} (shared code belongs below both)")
            if dep.startswith(PRODUCTION_MAY_NOT_IMPORT) and not mod.startswith(PRODUCTION_MAY_NOT_IMPORT):
                bad.append(f"{mod} imports the test reference {dep}")
    assert not bad, "\n".join(sorted(bad))


def test_the_checker_sees_imports():
    """The graph is not empty: the driver imports both stages below it."""
    deps = _graph()["cad_outlines.engine.compile"]
    assert any(d.startswith("cad_outlines.engine.frontend") for d in deps)
    assert any(d.startswith("cad_outlines.engine.store") for d in deps)
