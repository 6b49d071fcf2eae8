"""What the ``cad-outlines`` subcommands share: the user-error type, the one-line error
report, argparse value types with range checks, and tokenizer loading.

``cli.py`` (the command), ``demo.py`` and ``edit_cli.py`` (two subcommands) all import
this module; it imports none of them.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from .errors import CadOutlinesError, GrammarError

__all__ = ["UserError", "user_errors", "grammar_faults", "one_line", "grammar_error_line", "load_tokenizer",
           "positive_int", "non_negative_int", "temperature", "top_p"]


class UserError(CadOutlinesError):
    """A mistake in the command's input: reported as one line, exit status 2."""


def grammar_faults() -> tuple[type[BaseException], ...]:
    """lark's and the regex modules' own errors: about a grammar, when they escape a compile."""
    import lark

    errors: list[type[BaseException]] = [lark.exceptions.LarkError, re.error]
    try:
        import regex

        errors.append(regex.error)
    except ImportError:  # lark works without the regex module
        pass
    return tuple(errors)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input, not a bug: one line, exit status 2, no traceback
    (``--debug`` shows it). Every error the library raises on purpose
    (:class:`~cad_outlines.errors.CadOutlinesError`), a file that cannot be read, and lark's
    or a regex module's error about a grammar that slipped past the engine's own checks."""
    return (CadOutlinesError, OSError, UnicodeDecodeError, *grammar_faults())


def one_line(e: BaseException) -> str:
    """The error as one line: ``file: reason`` for an OS error, the message otherwise."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())


_TERMINAL_LINE = re.compile(r"^\s*([A-Z_][A-Z_0-9]*)(?:\.-?\d+)?\s*:(.*)$")
_REGEX_LITERAL = re.compile(r"/((?:[^/\\\n]|\\.)*)/([imslux]*)")


def grammar_error_line(e: BaseException, grammar_text: str, grammar_name: str) -> GrammarError:
    """A :class:`GrammarError` for a lark or regex exception raised while compiling
    `grammar_text` (the engine names the rule or terminal for the errors it knows; this
    is the net under it). A bad regular expression is traced to the first terminal whose
    ``/.../`` literal does not compile, with its line."""
    import lark

    if isinstance(e, lark.exceptions.LarkError):
        return GrammarError(f"lark cannot read it: {one_line(e)}", file=grammar_name)
    reason = one_line(e)
    try:
        import regex as engine
    except ImportError:
        engine = re
    for number, line in enumerate(grammar_text.splitlines(), 1):
        m = _TERMINAL_LINE.match(line)
        if not m:
            continue
        for literal in _REGEX_LITERAL.finditer(m.group(2)):
            try:
                engine.compile(literal.group(1))
            except Exception as bad:  # noqa: BLE001 - any failure to compile is the answer
                return GrammarError(f"bad regular expression /{literal.group(1)}/: {one_line(bad)}",
                                    file=grammar_name, line=number, name=m.group(1), kind="terminal")
    return GrammarError(f"bad regular expression: {reason}", file=grammar_name)


def load_tokenizer(path: str | Path):
    """A transformers tokenizer from a folder, or from a ``tokenizer.json`` /
    ``tokenizer.model`` file (its folder is loaded); a missing path or a folder with no
    tokenizer is a :class:`UserError`, not a hub lookup."""
    from transformers import AutoTokenizer

    p = Path(path)
    if not p.exists():
        raise UserError(f"tokenizer {str(path)!r}: no such file or folder")
    folder = p if p.is_dir() else p.parent
    names = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")
    if not any((folder / n).is_file() for n in names):
        raise UserError(f"tokenizer {str(path)!r}: no {', '.join(names[:2])} or tokenizer_config.json in "
                        f"{str(folder)!r}")
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except (ImportError, ValueError) as e:
        if (folder / "tokenizer.model").is_file() and not (folder / "tokenizer.json").is_file():
            raise UserError(f"tokenizer {str(path)!r}: reading tokenizer.model needs the sentencepiece and "
                            f"protobuf packages (pip install sentencepiece protobuf): {e}") from e
        raise UserError(f"tokenizer {str(path)!r}: transformers cannot load it: {e}") from e


# --- argparse value types: a bad value is argparse's one-line usage error, exit status 2 -------------

def _number(text: str, kind: type) -> float | int:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{'an integer' if kind is int else 'a number'} expected, not {text!r}")


def positive_int(text: str) -> int:
    """An int >= 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """An int >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def temperature(text: str) -> float:
    """A finite float >= 0 (0: greedy)."""
    value = _number(text, float)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0 (0: greedy), not {text}")
    return value


def top_p(text: str) -> float:
    """A float in (0, 1]."""
    value = _number(text, float)
    if not (0 < value <= 1):  # also false for nan
        raise argparse.ArgumentTypeError(f"must be in (0, 1] (the probability mass kept), not {text}")
    return value
