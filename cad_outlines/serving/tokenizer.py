"""The served model's tokenizer and vocabulary, loaded once per process (no vLLM import).

The engine's logits processor, the frontend's :class:`~.grammar_gate.GrammarGate` and the
Copy-as-Decode client all need the same :class:`Vocabulary` for a tokenizer folder: its
content hash keys the on-disk grammar cache, so a grammar compiled by one of them is
loaded, not rebuilt, by the others.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..engine.vocabulary import Vocabulary

__all__ = ["load_tokenizer", "shared_vocabulary"]

_VOCABS: dict[tuple[str, int | None], tuple[object, Vocabulary]] = {}
_LOCK = threading.Lock()


def load_tokenizer(path: str | Path):
    """A Hugging Face tokenizer for `path`: the fast class straight from tokenizer.json
    when there is one (AutoTokenizer may pick a slow class whose pre-tokenizer differs)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if (Path(path) / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(str(path))
    return AutoTokenizer.from_pretrained(str(path))


def shared_vocabulary(tokenizer_path: str | Path, model_vocab_size: int | None = None) -> tuple[object, Vocabulary]:
    """(tokenizer, vocabulary) for a tokenizer folder and the model's vocabulary size,
    built on first use and shared by everything in this process."""
    key = (str(tokenizer_path), model_vocab_size)
    with _LOCK:
        got = _VOCABS.get(key)
        if got is None:
            tokenizer = load_tokenizer(tokenizer_path)
            got = _VOCABS[key] = (tokenizer, Vocabulary.from_tokenizer(tokenizer, model_vocab_size=model_vocab_size))
        return got
