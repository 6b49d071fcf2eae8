"""One error family: every exception class the package defines derives from CadOutlinesError, and the old
names stay importable from where they were."""

import ast
import importlib
from pathlib import Path

import pytest

import cad_outlines
from cad_outlines import errors

PKG = Path(cad_outlines.__file__).parent


def _defined_exceptions():
    """(module, class name) for every class in the package whose name ends in Error or Exception."""
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Exception")):
                mod = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
                yield mod.removesuffix(".__init__"), node.name


def test_every_error_class_is_a_cad_outlines_error():
    found = list(_defined_exceptions())
    assert ("cad_outlines.errors", "GrammarError") in found
    for mod, name in found:
        try:
            module = importlib.import_module(mod)
        except ImportError as e:  # serving modules that need vLLM, outside its venv
            assert "vllm" in str(e), e
            continue
        cls = getattr(module, name)
        assert issubclass(cls, errors.CadOutlinesError), f"{mod}.{name}"


@pytest.mark.parametrize("old, new", [
    ("cad_outlines.engine.frontend.terminals:GrammarCompileError", errors.GrammarCompileError),
    ("cad_outlines.engine.frontend.terminals:LexError", errors.LexError),
    ("cad_outlines.engine.matcher:InvalidTokenError", errors.InvalidTokenError),
    ("cad_outlines.edits:SpanError", errors.SpanError),
    ("cad_outlines.edits:ProgramSyntaxError", errors.ProgramSyntaxError),
    ("cad_outlines.edits:IncompleteProgramError", errors.IncompleteProgramError),
    ("cad_outlines.generators.copy_decode:ContextLengthError", errors.ContextLengthError),
])
def test_old_names_are_the_new_classes(old, new):
    mod, name = old.split(":")
    assert getattr(importlib.import_module(mod), name) is new


def test_family_keeps_builtin_bases():
    assert issubclass(errors.GrammarCompileError, errors.GrammarError)
    assert issubclass(errors.GrammarError, ValueError)
    assert issubclass(errors.InvalidTokenError, errors.TokenError)
    assert issubclass(errors.ServingError, RuntimeError)
    assert issubclass(errors.UnsupportedPythonError, ImportError)
    for cls in (errors.SpanError, errors.ProgramSyntaxError, errors.IncompleteProgramError):
        assert issubclass(cls, errors.ProgramError)


def test_resource_limit_error_names_limit_value_and_how():
    e = errors.ResourceLimitError("max_grammar_bytes", 5_000_000, 1_000_000, what="grammar")
    assert "max_grammar_bytes" in str(e) and "5000000" in str(e) and "1000000" in str(e) and "raise" in str(e)
    assert (e.limit, e.value, e.maximum) == ("max_grammar_bytes", 5_000_000, 1_000_000)


def test_grammar_error_names_where():
    e = errors.GrammarError("bad regex", file="g.lark", line=3, column=5, name="NUM", kind="terminal")
    assert str(e) == "g.lark:3:5: terminal NUM: bad regex"
