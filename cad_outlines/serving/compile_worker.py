"""``python -m cad_outlines.serving.compile_worker``: compile one grammar into the on-disk
cache, in a process of its own (used by :class:`~.grammar_gate.GrammarGate`).

A fresh interpreter rather than a multiprocessing child: a spawned child would import the
parent's main module (the whole vLLM server), and a forked one would copy a process full
of threads. Reads one JSON object on stdin (``name`` or ``text``, ``start``, ``tokenizer``,
``model_vocab_size``, ``cache``); writes ``{"error": null}`` or ``{"error": "why"}`` on
stdout; the compile's memory goes back to the system when it exits.
"""

from __future__ import annotations

import json
import sys

from ..engine.compile import wait_for_cache_writes
from .grammar_library import GrammarLibrary
from .request import GrammarSpec, RequestError
from .tokenizer import shared_vocabulary

__all__ = ["compile_into_cache", "main"]


def compile_into_cache(job: dict) -> str | None:
    """Compile the grammar a job names into its cache folder; the refusal, if any."""
    spec = GrammarSpec(name=job.get("name"), text=job.get("text"), start=job.get("start"))
    try:
        _, vocab = shared_vocabulary(job["tokenizer"], job.get("model_vocab_size"))
        GrammarLibrary(vocab, cache=job["cache"]).get(spec)
    except RequestError as e:
        return str(e)
    finally:
        wait_for_cache_writes()  # the parent loads the file once we answer
    return None


def main() -> int:
    print(json.dumps({"error": compile_into_cache(json.load(sys.stdin))}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
