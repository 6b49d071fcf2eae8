"""Where the Lark grammars shipped with the package live.

In a wheel they sit in ``cad_outlines/grammars/``; in a source checkout (editable
install) they are the repository's top-level ``grammars/``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["grammar_dir", "grammar_path", "load_grammar_text", "available_grammars"]


def grammar_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "grammars", here.parent / "grammars"):
        if (candidate / "copy_edit.lark").is_file():
            return candidate
    raise FileNotFoundError(f"shipped grammars not found next to {here}")


def available_grammars() -> list[str]:
    return sorted(p.stem for p in grammar_dir().glob("*.lark"))


def grammar_path(name: str) -> Path:
    """Path of a shipped grammar by name (``"copy_edit"``) or file name."""
    path = grammar_dir() / (name if name.endswith(".lark") else name + ".lark")
    if not path.is_file():
        raise FileNotFoundError(f"no shipped grammar {name!r}; available: {', '.join(available_grammars())}")
    return path


def load_grammar_text(name: str) -> str:
    return grammar_path(name).read_text(encoding="utf-8")
