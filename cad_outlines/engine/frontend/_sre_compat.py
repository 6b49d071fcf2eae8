"""The one place the engine touches CPython's private regex internals.

:mod:`.automata` compiles a terminal's regex by walking the parse tree of CPython's own
regex parser, so that our DFAs have exactly Python's ``re`` semantics. That parser
(``re._parser``), its constants (``re._constants``), the case-folding table
(``re._casefix``), ``re._compiler._combine_flags`` and ``_sre``'s case functions are
private and change between versions. Everything the engine uses of them is re-exported
here, after a version check that fails with a clear error instead of a wrong DFA.

Read against the CPython sources of 3.11, 3.12, 3.13 and 3.14 (the same for all four
unless noted):

- ``re._parser.parse(pattern, flags)`` and the op codes the engine walks (LITERAL,
  NOT_LITERAL, ANY, IN, BRANCH, SUBPATTERN, MAX/MIN_REPEAT, POSSESSIVE_REPEAT,
  ATOMIC_GROUP, ASSERT, ASSERT_NOT, GROUPREF, GROUPREF_EXISTS, AT, CATEGORY, RANGE,
  NEGATE; 3.11 added the atomic and possessive ones, hence the lower bound).
- 3.13: an empty negative lookahead ``(?!)`` parses to ``(FAILURE, ())`` instead of
  ``(ASSERT_NOT, (1, []))``; :func:`parse` rewrites it back, so the automata see one form
  (both mean "never matches"). ``SRE_FLAG_TEMPLATE`` and the ``t`` flag are gone (not
  used here); ``re.error`` became ``re.PatternError`` (``re.error`` stays an alias).
- 3.14: ``\\z`` is a new spelling of ``\\Z`` (both parse to ``AT_END_STRING``, an anchor
  the engine refuses either way); ``\\B`` matches the empty string at run time (anchors
  are refused).
- ``re._casefix._EXTRA_CASES`` and ``_sre.unicode_tolower`` follow each version's
  Unicode database (read at run time, never copied). ``_sre.ascii_iscased``,
  ``ascii_tolower``, ``unicode_iscased``, ``unicode_tolower`` and
  ``re._compiler._combine_flags(flags, add, del)`` have not changed.

Other interpreters (PyPy ships its own ``_sre``) and versions outside
:data:`SUPPORTED` raise :class:`UnsupportedPythonError` on import.
"""

from __future__ import annotations

import sys

from ...errors import UnsupportedPythonError

__all__ = ["SUPPORTED", "UnsupportedPythonError", "K", "parse", "combine_flags", "EXTRA_CASES",
           "ascii_iscased", "ascii_tolower", "unicode_iscased", "unicode_tolower", "check"]

SUPPORTED = ((3, 11), (3, 14))  # inclusive range of (major, minor) whose sources were read


_NEEDED_OPS = ("LITERAL", "NOT_LITERAL", "ANY", "IN", "BRANCH", "SUBPATTERN", "MAX_REPEAT", "MIN_REPEAT",
               "POSSESSIVE_REPEAT", "ATOMIC_GROUP", "ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS", "AT",
               "CATEGORY", "RANGE", "NEGATE", "FAILURE", "MAXREPEAT", "SRE_FLAG_IGNORECASE", "SRE_FLAG_ASCII",
               "SRE_FLAG_DOTALL", "CATEGORY_DIGIT", "AT_END_STRING", "AT_BOUNDARY")


def check(implementation: str | None = None, version: tuple[int, int] | None = None) -> None:
    """Raise :class:`UnsupportedPythonError` unless this is CPython within :data:`SUPPORTED`."""
    implementation = implementation or sys.implementation.name
    version = version or sys.version_info[:2]
    lo, hi = SUPPORTED
    if implementation != "cpython" or not lo <= version <= hi:
        raise UnsupportedPythonError(
            f"cad_outlines compiles grammar terminals with CPython's private regex parser (re._parser, "
            f"re._constants, re._casefix, _sre), which it was written and checked against for CPython "
            f"{lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}; this is {implementation} {version[0]}.{version[1]}. "
            "Use a CPython in that range (requires-python says the same).")


check()

import _sre  # noqa: E402
import re._casefix as _casefix  # noqa: E402
import re._compiler as _compiler  # noqa: E402
import re._constants as K  # noqa: E402
import re._parser as _parser  # noqa: E402

_missing = [n for n in _NEEDED_OPS if not hasattr(K, n)]
_missing += [f"_sre.{n}" for n in ("ascii_iscased", "ascii_tolower", "unicode_iscased", "unicode_tolower")
             if not hasattr(_sre, n)]
_missing += [n for n, ok in (("re._compiler._combine_flags", hasattr(_compiler, "_combine_flags")),
                             ("re._casefix._EXTRA_CASES", hasattr(_casefix, "_EXTRA_CASES"))) if not ok]
if _missing:  # pragma: no cover - only on an interpreter that changed them
    raise UnsupportedPythonError(f"this Python's regex internals lack {', '.join(_missing)}, which cad_outlines "
                                 f"needs (Python {sys.version.split()[0]})")

EXTRA_CASES: dict[int, tuple[int, ...]] = _casefix._EXTRA_CASES
ascii_iscased = _sre.ascii_iscased
ascii_tolower = _sre.ascii_tolower
unicode_iscased = _sre.unicode_iscased
unicode_tolower = _sre.unicode_tolower


def combine_flags(flags: int, add_flags: int, del_flags: int) -> int:
    """The flags inside ``(?add-del:...)`` (``re._compiler._combine_flags``)."""
    return _compiler._combine_flags(flags, add_flags, del_flags)


def parse(pattern: str, flags: int = 0):
    """``re._parser.parse``, in one form on every supported version: a 3.13+
    ``(FAILURE, ())`` (an empty negative lookahead ``(?!)``) becomes
    ``(ASSERT_NOT, (1, <empty>))``, as 3.11 and 3.12 give it."""
    parsed = _parser.parse(pattern, flags)
    _unify(parsed)
    return parsed


def _unify(sub) -> None:
    data = sub.data
    for i, (op, av) in enumerate(data):
        if op is K.FAILURE:
            data[i] = (K.ASSERT_NOT, (1, _parser.SubPattern(sub.state, [])))
            continue
        for x in av if isinstance(av, (tuple, list)) else (av,):
            if isinstance(x, _parser.SubPattern):
                _unify(x)
            elif isinstance(x, list):  # BRANCH's alternatives
                for y in x:
                    if isinstance(y, _parser.SubPattern):
                        _unify(y)
