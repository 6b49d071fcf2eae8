"""How a document is cut into lines, the one definition every module shares.

A line ends just after each "\\n" (so a CRLF line keeps its "\\r\\n"); the text after
the last "\\n", if any, is a final line without an ending. A lone "\\r" is not a line
break. The empty document has no lines.
"""

from __future__ import annotations

import difflib

__all__ = ["split_lines", "number_lines", "unified_diff"]


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its own ending; ``"".join(...) == text``."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def number_lines(text: str, width: int | None = None) -> str:
    """`text` with a visible 1-based line number before every line (for prompts)."""
    lines = split_lines(text)
    width = width or len(str(max(len(lines), 1)))
    out = []
    for i, line in enumerate(lines, 1):
        body = line if line.endswith("\n") else line + "\n"
        out.append(f"{i:>{width}} | {body}")
    return "".join(out)


def unified_diff(before: str | list[str], after: str | list[str], from_name: str = "before",
                 to_name: str = "after", context: int = 3) -> str:
    """A unified diff from `before` to `after` (texts, or lists of lines from :func:`split_lines`), line
    endings kept; a last line without its newline is marked ``\\ No newline at end of file`` as git does."""
    a = split_lines(before) if isinstance(before, str) else before
    b = split_lines(after) if isinstance(after, str) else after
    out = []
    for line in difflib.unified_diff(a, b, from_name, to_name, n=context):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
