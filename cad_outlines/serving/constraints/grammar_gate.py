"""A grammar's first use must not stall the batch: compile it before its request reaches
the engine, and hold that request (alone) until then.

The logits processor runs inside the engine's step, so a grammar compiled there stops
every request of the engine while it builds (python.lark x Qwen2.5: about 4 s with the
lazy compile the library uses, 45 s for the eager store; a large grammar sent as text can
take longer). A :class:`GrammarGate` sits in the frontend instead -- the HTTP server's
middleware (:mod:`..http.middleware`), :class:`~..editing.async_backend.AsyncLLMBackend`, your own
code before ``AsyncLLM.generate`` -- and answers "is this grammar in the on-disk cache for
the engine's tokenizer?". If not, a worker process (``python -m
cad_outlines.serving.constraints.compile_worker``: its own GIL and memory, under OS limits on
memory, CPU time and file size, killed past a wall-time limit; a few at once) checks and
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
import atexit
import os
import pickle
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ...engine.compile import cache_dir
from ...errors import ResourceLimitError
from ...limits import env_name
from .admission import note_vocab_size
from .compile_worker import CompileRefused, run_compile_worker
from .grammar_library import GrammarLibrary, grammar_source_of, known_check, refuse_file_imports, remember_check
from ..limits import ServerLimits, server_limits, serving_logger
from .request import GrammarSpec, RequestError
from ..tokenizer import shared_vocabulary

__all__ = ["GrammarGate", "compile_in_worker", "evict_cache"]

log = serving_logger()

# Threads of gate work: a compile waiting for a worker slot holds one (at most max_pending_compiles), so
# there are enough left for the fast path (a grammar already in the cache: a file lookup); made on demand.
_THREADS = ThreadPoolExecutor(max_workers=256, thread_name_prefix="cad-grammar-gate")
_GATES: dict[tuple[str, int | None, str | None], GrammarGate] = {}
_GATES_LOCK = threading.Lock()
_SLOTS: dict[int, threading.BoundedSemaphore] = {}  # compile_workers -> the process's worker slots
_SLOTS_LOCK = threading.Lock()
_VOCAB_FILES: dict[tuple[str, int | None], str] = {}
_VOCAB_DIR: list[str] = []


def _slots(n: int) -> threading.BoundedSemaphore:
    with _SLOTS_LOCK:
        got = _SLOTS.get(n)
        if got is None:
            got = _SLOTS[n] = threading.BoundedSemaphore(n)
        return got


def _vocab_file(tokenizer_path: str, model_vocab_size: int | None) -> str:
    """This process's vocabulary, pickled once into a private temporary folder, so a worker
    loads it in milliseconds instead of building it from the tokenizer (seconds)."""
    key = (tokenizer_path, model_vocab_size)
    with _SLOTS_LOCK:
        path = _VOCAB_FILES.get(key)
        if path is None:
            if not _VOCAB_DIR:
                _VOCAB_DIR.append(tempfile.mkdtemp(prefix="cad-outlines-vocab-"))
                atexit.register(shutil.rmtree, _VOCAB_DIR[0], True)
            _, vocab = shared_vocabulary(tokenizer_path, model_vocab_size)
            path = os.path.join(_VOCAB_DIR[0], f"vocab-{len(_VOCAB_FILES)}.pickle")
            with open(path, "wb") as f:
                pickle.dump(vocab, f, protocol=pickle.HIGHEST_PROTOCOL)
            _VOCAB_FILES[key] = path
        return path


def compile_in_worker(spec: GrammarSpec, tokenizer_path: str, model_vocab_size: int | None, cache: Path,
                      limits: ServerLimits | None = None) -> None:
    """Check and compile `spec` into `cache` in a worker process under `limits` (waiting for
    a free worker slot first); evict the least recently used cache files over the cap.
    Raises :class:`~.compile_worker.CompileRefused` (a :class:`RequestError`)."""
    limits = limits or server_limits()
    job = {"name": spec.name, "text": spec.text, "schema": spec.schema, "start": spec.start,
           "whitespace": spec.whitespace, "property_order": spec.property_order, "tokenizer": tokenizer_path, "model_vocab_size": model_vocab_size,
           "cache": str(cache),
           # a grammar sent as text (or a JSON Schema) is built whole here, under the limits: a lazy store would
           # build its rows inside the engine's steps, unbounded for a grammar whose lexer has very many states
           "eager": spec.name is None,
           "vocab_file": _vocab_file(tokenizer_path, model_vocab_size)}
    what = spec.label
    with _slots(limits.compile_workers):
        t0 = time.monotonic()
        log.info("cad_outlines: compiling grammar %s for %s in a worker process", what, tokenizer_path)
        try:
            run_compile_worker(job, limits)
        except CompileRefused as e:
            log.warning("cad_outlines: grammar %s refused after %.1f s: %s%s", what, time.monotonic() - t0, e,
                        f" (worker stderr: {e.detail[-500:]})" if e.detail and e.limit else "")
            raise
        log.info("cad_outlines: grammar %s compiled in %.1f s", what, time.monotonic() - t0)
    evict_cache(Path(cache), limits.cache_max_bytes)


def evict_cache(folder: Path, max_bytes: int, *, keep_newer_s: float = 5.0) -> list[Path]:
    """Delete the least recently used files of a grammar cache folder (by modification time:
    the gate touches a file whenever a request finds it there) until the folder holds at most
    `max_bytes`; files touched in the last `keep_newer_s` seconds stay (a request is about
    to load them). Leftover temporary files of killed workers go first. The deleted paths."""
    try:
        entries = [(p, p.stat()) for p in folder.iterdir() if p.is_file()]
    except OSError:
        return []
    total = sum(st.st_size for _, st in entries)
    if total <= max_bytes:
        return []
    now = time.time()
    entries.sort(key=lambda e: (".tmp" not in e[0].name, e[1].st_mtime))  # temporaries first, then oldest
    gone = []
    for path, st in entries:
        if total <= max_bytes:
            break
        if now - st.st_mtime < keep_newer_s:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= st.st_size
        gone.append(path)
    if gone:
        log.info("cad_outlines: grammar cache %s over cache_max_bytes = %d: %d least recently used files deleted",
                 folder, max_bytes, len(gone))
    return gone


class GrammarGate:
    """Grammars compiled into the on-disk cache before their requests are admitted.

    ``await gate.ready(spec)`` (or ``gate.ensure(spec)``, blocking) returns once the
    engine would only load `spec`, and raises :class:`RequestError` if it does not
    compile (or its compile ran past a limit: :class:`~.compile_worker.CompileRefused`).
    Concurrent requests for one grammar wait for one compile; each later request looks
    for the cache file again (a thread, milliseconds: the cache may have evicted it) and
    marks it used; a refused grammar is refused again without work for
    ``limits.refusal_ttl_s``; more than ``limits.max_pending_compiles`` compiles running or
    waiting are refused (:class:`~cad_outlines.errors.ResourceLimitError`)."""

    remembered = 1024

    def __init__(self, tokenizer_path: str | Path, model_vocab_size: int | None = None, *,
                 cache: str | Path | None = None, limits: ServerLimits | None = None):
        self.tokenizer_path, self.model_vocab_size = str(tokenizer_path), model_vocab_size
        self.cache = Path(cache) if cache is not None else None  # None: cache_dir() when used ($CAD_OUTLINES_CACHE)
        self._limits = limits
        self.compiled: list[str] = []  # grammar keys (GrammarSpec.key) this gate had a worker compile
        self._futures: OrderedDict[str, Future] = OrderedDict()
        self._refused: OrderedDict[str, tuple[float, RequestError]] = OrderedDict()  # key -> (until, error)
        self._pending = 0
        self._lock = threading.RLock()  # a done callback may run in the thread holding it

    @property
    def limits(self) -> ServerLimits:
        return self._limits or server_limits()

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

    def vocab_size(self) -> int:
        """The real vocabulary's size (token ids a request may name), built on first use."""
        n = shared_vocabulary(self.tokenizer_path, self.model_vocab_size)[1].tokenizer_size
        note_vocab_size(n)
        return n

    async def avocab_size(self) -> int:
        """:meth:`vocab_size` without blocking the event loop (the first call loads the tokenizer)."""
        return await asyncio.wrap_future(_THREADS.submit(self.vocab_size))

    async def awarm(self) -> None:
        """Build the vocabulary and its copy for the compile workers now, off the event loop."""
        def warm():
            self.vocab_size()
            _vocab_file(self.tokenizer_path, self.model_vocab_size)

        await asyncio.wrap_future(_THREADS.submit(warm))

    def future(self, spec: GrammarSpec) -> Future:
        """A future that resolves when `spec` is in the cache (or fails with RequestError)."""
        key = f"{self.folder()}|{spec.key}"  # ready in one cache folder says nothing of another
        now = time.monotonic()
        with self._lock:
            refused = self._refused.get(key)
            if refused is not None:
                if refused[0] > now:
                    return _failed(refused[1])
                del self._refused[key]
            fut = self._futures.get(key)
            if fut is None or fut.done():  # done: look again (a cache file may have been evicted since)
                limit = self.limits.max_pending_compiles
                if self._pending >= limit:
                    return _failed(ResourceLimitError(
                        "max_pending_compiles", self._pending + 1, limit, what="grammar compiles running or waiting",
                        how="try again later; the server operator sets it with " + env_name("max_pending_compiles")))
                self._pending += 1
                fut = self._futures[key] = _THREADS.submit(self._prepare, spec, key)
                fut.add_done_callback(self._done)
                done = [k for k, f in self._futures.items() if f.done()]
                for k in done[: max(0, len(self._futures) - self.remembered)]:
                    del self._futures[k]
            self._futures.move_to_end(key)
            return fut

    def _done(self, _fut: Future) -> None:
        with self._lock:
            self._pending -= 1

    def ensure(self, spec: GrammarSpec) -> None:
        """Block until `spec` is compiled in the cache; RequestError if it cannot be."""
        self.future(spec).result()

    async def ready(self, spec: GrammarSpec) -> None:
        """Wait (without blocking the event loop) until `spec` is compiled in the cache."""
        await asyncio.wrap_future(self.future(spec))

    def _refuse(self, key: str, error: RequestError) -> None:
        with self._lock:
            self._refused[key] = (time.monotonic() + self.limits.refusal_ttl_s, error)
            while len(self._refused) > self.remembered:
                self._refused.popitem(last=False)

    def _prepare(self, spec: GrammarSpec, key: str) -> None:
        known, refusal = known_check(spec)
        if known and refusal is not None:  # lark refused it before: no worker
            raise RequestError(refusal)
        if spec.schema is None:
            grammar_source_of(spec)  # an unknown shipped name is refused here, at once
        refuse_file_imports(spec)  # so is a relative %import in a text
        _, vocab = shared_vocabulary(self.tokenizer_path, self.model_vocab_size)
        folder = self.folder()
        library = GrammarLibrary(vocab, cache=folder)
        if library.on_disk(spec, touch=True):
            remember_check(spec, None)  # it compiled: validate_params only looks it up
            return
        try:
            compile_in_worker(spec, self.tokenizer_path, self.model_vocab_size, folder, self.limits)
        except CompileRefused as e:
            if e.limit is None:
                remember_check(spec, str(e))  # the grammar itself is at fault: validate_params says so too
            self._refuse(key, e)
            raise
        remember_check(spec, None)
        self.compiled.append(spec.key)
        if not library.on_disk(spec, touch=True):
            log.warning("cad_outlines: grammar %s was compiled but is not in %s where expected: the engine will "
                        "compile it again (and stall while it does)", spec.label, folder)


def _failed(error: Exception) -> Future:
    fut: Future = Future()
    fut.set_exception(error)
    return fut
