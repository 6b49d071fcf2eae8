"""Reading and writing the document an edit changes: byte for byte, errors naming the file, and no write
that empties a document unless the caller asks for it.

An edit program that deletes every line (``<program></program>``: no copy, no gen) is a complete, valid
edit, and also what a model writes when it has gone wrong (another model's tokenizer, a prompt it does not
follow). Writing it over the file would lose the document, so :func:`write_document` refuses unless
``allow_delete_all`` is set. The command line (``--output``, ``--in-place``) and the agent tool
(``edit_tool(write=True)``) both write through it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DocumentError

__all__ = ["read_document", "write_document", "deletes_everything"]


def read_document(path: str | Path) -> str:
    """The text of the file at `path`, UTF-8, line endings as they are (``\\r\\n`` stays). A file that is
    not UTF-8 raises :class:`DocumentError` naming it and the first bad byte; OSErrors pass through (they
    name the file)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(f"{str(path)!r} is not UTF-8 text: byte {data[e.start]:#04x} at offset {e.start} "
                            f"({e.reason}); edits read and write UTF-8 files") from None


def deletes_everything(before: str, after: str) -> bool:
    """Whether an edit from `before` to `after` deletes every line of a non-empty document."""
    return bool(before) and not after


def write_document(path: str | Path, before: str, after: str, *, allow_delete_all: bool = False,
                   flag: str = "allow_delete_all=True") -> None:
    """Write `after`, the edited `before`, to `path` (UTF-8, line endings kept). An edit that deletes every
    line of a non-empty `before` raises :class:`DocumentError` and writes nothing, unless
    `allow_delete_all`; `flag` is how the caller's user says so (named in the message)."""
    if deletes_everything(before, after) and not allow_delete_all:
        n = before.count("\n") + (not before.endswith("\n"))
        raise DocumentError(f"not writing {str(path)!r}: the edit deletes every line of the document ({n} "
                            f"line{'s' * (n != 1)}); pass {flag} to write it anyway")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(after)
