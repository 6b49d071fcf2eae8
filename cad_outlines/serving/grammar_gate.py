"""A grammar's first use must not stall the batch: compile it before its request reaches
the engine, and hold that request (alone) until then.

The logits processor runs inside the engine's step, so a grammar compiled there stops
every request of the engine while it builds (python.lark x Qwen2.5: about 4 s with the
lazy compile the library uses, 45 s for the eager store; a large grammar sent as text can
take longer). A :class:`GrammarGate` sits in the frontend instead -- the HTTP server's
middleware (:mod:`.http_admission`), :class:`~.async_backend.AsyncLLMBackend`, your own
code before ``AsyncLLM.generate`` -- and answers "is this grammar in the on-disk cache for
the engine's tokenizer?". If not, a worker process (``python -m
cad_outlines.serving.compile_worker``: its own GIL and memory, one compile at a time)
compiles it there while the request waits; the engine then only loads the
file (a memory map, milliseconds). This is what vLLM does for its own structured outputs
(the request waits for its grammar, the batch goes on): the held request is never decoded
unconstrained, and a grammar that does not compile is refused before it is admitted.

The check needs the engine's vocabulary (the cache is keyed by its content hash): the
gate builds it once per process from the same tokenizer folder and model vocabulary size
as the engine's processor, on a gate thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..engine.compile import cache_dir
from .grammar_library import GrammarLibrary, check_grammar
from .request import GrammarSpec, RequestError
from .tokenizer import shared_vocabulary

__all__ = ["GrammarGate"]

log = logging.getLogger("cad_outlines.serving")

_THREADS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="cad-grammar-gate")
_ONE_COMPILE = threading.Lock()  # one worker at a time: compiles are CPU- and memory-heavy
_GATES: dict[tuple[str, int | None, str | None], GrammarGate] = {}
_GATES_LOCK = threading.Lock()


class _WorkerDied(RequestError):
    """The compile worker died (killed, out of memory): not remembered as a refusal."""


def _run_worker(spec: GrammarSpec, tokenizer_path: str, model_vocab_size: int | None, cache: Path) -> str | None:
    """Compile `spec` into `cache` in a fresh ``python -m cad_outlines.serving.compile_worker``;
    the refusal, if any."""
    job = {"name": spec.name, "text": spec.text, "start": spec.start, "tokenizer": tokenizer_path,
           "model_vocab_size": model_vocab_size, "cache": str(cache)}
    root = str(Path(__file__).resolve().parents[2])  # where this cad_outlines is imported from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    with _ONE_COMPILE:
        done = subprocess.run([sys.executable, "-m", "cad_outlines.serving.compile_worker"], input=json.dumps(job),
                              capture_output=True, text=True, env=env)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])["error"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise _WorkerDied(f"the grammar compile worker ended with status {done.returncode}: "
                          f"{done.stderr.strip()[-2000:]}") from None


class GrammarGate:
    """Grammars compiled into the on-disk cache before their requests are admitted.

    ``await gate.ready(spec)`` (or ``gate.ensure(spec)``, blocking) returns once the
    engine would only load `spec`, and raises :class:`RequestError` if it does not
    compile. Concurrent requests for one grammar wait for one compile; a refusal is
    remembered (the last 1024 grammars are)."""

    remembered = 1024

    def __init__(self, tokenizer_path: str | Path, model_vocab_size: int | None = None, *,
                 cache: str | Path | None = None):
        self.tokenizer_path, self.model_vocab_size = str(tokenizer_path), model_vocab_size
        self.cache = Path(cache) if cache is not None else None  # None: cache_dir() when used ($CAD_OUTLINES_CACHE)
        self.compiled: list[str] = []  # grammar keys (GrammarSpec.key) this gate had a worker compile
        self._futures: OrderedDict[str, Future] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, tokenizer_path: str | Path, model_vocab_size: int | None = None, *,
               cache: str | Path | None = None) -> GrammarGate:
        """One gate per tokenizer (and cache folder) per process."""
        key = (str(tokenizer_path), model_vocab_size, None if cache is None else str(cache))
        with _GATES_LOCK:
            gate = _GATES.get(key)
            if gate is None:
                gate = _GATES[key] = cls(tokenizer_path, model_vocab_size, cache=cache)
            return gate

    @classmethod
    def for_model_config(cls, model_config) -> GrammarGate:
        """The gate for a vLLM ``ModelConfig`` (the engine's tokenizer and vocabulary size)."""
        return cls.shared(str(model_config.tokenizer), int(model_config.get_vocab_size()))

    def folder(self) -> Path:
        return self.cache if self.cache is not None else cache_dir()

    def future(self, spec: GrammarSpec) -> Future:
        """A future that resolves when `spec` is in the cache (or fails with RequestError)."""
        key = f"{self.folder()}|{spec.key}"  # ready in one cache folder says nothing of another
        with self._lock:
            fut = self._futures.get(key)
            if fut is None or (fut.done() and isinstance(fut.exception(), _WorkerDied)):
                fut = self._futures[key] = _THREADS.submit(self._prepare, spec)
                done = [k for k, f in self._futures.items() if f.done()]
                for k in done[: max(0, len(self._futures) - self.remembered)]:
                    del self._futures[k]
            self._futures.move_to_end(key)
            return fut

    def ensure(self, spec: GrammarSpec) -> None:
        """Block until `spec` is compiled in the cache; RequestError if it cannot be."""
        self.future(spec).result()

    async def ready(self, spec: GrammarSpec) -> None:
        """Wait (without blocking the event loop) until `spec` is compiled in the cache."""
        await asyncio.wrap_future(self.future(spec))

    def _prepare(self, spec: GrammarSpec) -> None:
        check_grammar(spec)  # lark's refusals come at once, without a worker
        _, vocab = shared_vocabulary(self.tokenizer_path, self.model_vocab_size)
        folder = self.folder()
        library = GrammarLibrary(vocab, cache=folder)
        if library.on_disk(spec):
            return
        log.info("cad_outlines: compiling grammar %s for %s in a worker process", spec.name or "(by text)",
                 self.tokenizer_path)
        error = _run_worker(spec, self.tokenizer_path, self.model_vocab_size, folder)
        if error is not None:
            raise RequestError(error)
        self.compiled.append(spec.key)
        if not library.on_disk(spec):
            log.warning("cad_outlines: grammar %s was compiled but is not in %s where expected: the engine will "
                        "compile it again (and stall while it does)", spec.name or "(by text)", folder)
