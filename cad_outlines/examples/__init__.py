"""Small example documents and edits shipped with the package (the demo's default)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

__all__ = ["Example", "load_examples"]


@dataclass(frozen=True)
class Example:
    name: str
    instruction: str
    before: str
    after: str


def load_examples() -> list[Example]:
    data = json.loads(resources.files(__package__).joinpath("edits.json").read_text(encoding="utf-8"))
    return [Example(**item) for item in data]
