"""CPython's private regex internals sit behind one module with a version check
(cad_outlines/engine/frontend/_sre_compat.py); what changed between 3.11 and 3.14 is handled there."""

import re
import sys
import tomllib
from pathlib import Path

import pytest

from cad_outlines.engine.frontend import _sre_compat as compat
from cad_outlines.engine.frontend.automata import regex_to_dfa

REPO = Path(__file__).resolve().parents[3]


def test_only_the_compat_module_touches_the_private_internals():
    private = re.compile(r"^\s*(import|from)\s+(_sre\b|re\._|sre_parse|sre_constants|sre_compile)", re.M)
    users = [str(p.relative_to(REPO)) for p in (REPO / "cad_outlines").rglob("*.py")
             if private.search(p.read_text(encoding="utf-8"))]
    assert users == ["cad_outlines/engine/frontend/_sre_compat.py"]


@pytest.mark.parametrize("impl,version", [("cpython", (3, 10)), ("cpython", (3, 15)), ("pypy", (3, 11))])
def test_other_interpreters_get_a_clear_error(impl, version):
    with pytest.raises(compat.UnsupportedPythonError) as info:
        compat.check(impl, version)
    msg = str(info.value)
    assert f"this is {impl} {version[0]}.{version[1]}" in msg and "CPython 3.11 to 3.14" in msg
    assert isinstance(info.value, ImportError)


def test_this_python_is_supported():
    compat.check()
    assert compat.SUPPORTED[0] <= sys.version_info[:2] <= compat.SUPPORTED[1]


def test_requires_python_says_the_same():
    spec = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    lo, hi = compat.SUPPORTED
    assert spec == f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1] + 1}"


def test_failure_ops_become_empty_negative_lookaheads():
    """3.13+ parses `(?!)` to (FAILURE, ()); the automata see 3.11's (ASSERT_NOT, (1, []))
    whatever the version. Built by hand here so the rewrite is checked on every version."""
    from re import _parser

    parsed = _parser.parse("a(?!)b|(c(?!))")
    parsed.data[0][1][1][0].data[1] = (compat.K.FAILURE, ())  # in a branch
    parsed.data[0][1][1][1].data[0][1][3].data[1] = (compat.K.FAILURE, ())  # in a group in a branch
    compat._unify(parsed)
    text = repr(parsed)
    assert "FAILURE" not in text and text.count("(ASSERT_NOT, (1, []))") == 2


@pytest.mark.parametrize("pattern,yes,no", [
    ("a(?!)", [], ["a", ""]),
    ("a(?!)|b", ["b"], ["a", "ab"]),
    ("(?:x(?!)|y)+", ["y", "yy"], ["x", "xy"]),
])
def test_empty_negative_lookahead_matches_like_re(pattern, yes, no):
    dfa = regex_to_dfa(pattern, 0, semantics="full")
    for s in yes:
        assert re.fullmatch(pattern, s) and dfa.fullmatch(s.encode()), s
    for s in no:
        assert not re.fullmatch(pattern, s) and not dfa.fullmatch(s.encode()), s


def test_case_folding_follows_the_running_unicode_tables():
    dfa = regex_to_dfa("(?i)k", 0, semantics="full")
    for ch in "kK\u212a":  # KELVIN SIGN lowercases to k
        assert dfa.fullmatch(ch.encode()) == bool(re.fullmatch("(?i)k", ch))
