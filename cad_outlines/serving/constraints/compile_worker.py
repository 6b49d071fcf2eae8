"""``python -m cad_outlines.serving.constraints.compile_worker``: compile one grammar into the on-disk
cache, in a process of its own (used by :class:`~.grammar_gate.GrammarGate` and by the logits
processor for a grammar that reached the engine uncompiled), under OS-enforced limits.

A fresh interpreter rather than a multiprocessing child: a spawned child would import the
parent's main module (the whole vLLM server), and a forked one would copy a process full
of threads. :func:`run_compile_worker` starts it through a bootstrap that sets its
``resource`` limits (and its nice value, ``compile_nice``) before anything is imported -- address space
(``RLIMIT_AS``), CPU seconds (``RLIMIT_CPU``) and the largest file it may write (``RLIMIT_FSIZE``: a grammar
whose store would be huge) -- and kills its process group when it runs past the wall-time limit.

The worker gets a process group of its own (to be killed whole) but stays in the server's session: a
new session is a new scheduling group under Linux's autogroup, and on a 2-core node whose vLLM engine
keeps both cores busy a worker there got under 1% of a core (python.lark x GPT-2, 4 CPU s, ran past
the 300 s wall limit); in the server's group at nice 5 it gets a share the engine still dominates
(about 14% of a core beside a busy vLLM CPU engine, against 4% at nice 10).

The worker reads one JSON object on stdin (``name``, ``text`` or ``schema``, ``start``, ``whitespace``,
``property_order``, ``tokenizer``, ``model_vocab_size``, ``cache``, optionally ``vocab_file``: the parent's pickled
:class:`~cad_outlines.engine.vocabulary.Vocabulary`, written by the server itself into a private
temporary folder); checks the grammar (lark loads it, no file imports), compiles
it and writes ``{"error": null}`` or ``{"error": "why", "limit": name-or-null}`` on stdout; the
compile's memory goes back to the system when it exits.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

from ...errors import RequestError
from ...limits import env_name
from ..limits import ServerLimits

__all__ = ["CompileRefused", "compile_into_cache", "main", "run_compile_worker"]

# Sets the limits, then runs this module: nothing of the package is imported before they hold.
_BOOTSTRAP = ("import os, resource, sys\n"
              "os.nice(int(sys.argv[4]))\n"  # the engine and the API server come first on a busy node
              "for name, value in ((resource.RLIMIT_AS, int(sys.argv[1])), (resource.RLIMIT_CPU, int(sys.argv[2])),"
              " (resource.RLIMIT_FSIZE, int(sys.argv[3]))):\n"
              "    resource.setrlimit(name, (value, value))\n"
              "from cad_outlines.serving.constraints.compile_worker import main\n"
              "sys.exit(main())\n")


class CompileRefused(RequestError):
    """The worker refused the grammar or ran past a limit. ``limit`` names the limit (None:
    the grammar itself is at fault); the refusal is remembered for ``refusal_ttl_s``."""

    def __init__(self, message: str, limit: str | None = None, detail: str = ""):
        super().__init__(message)
        self.limit, self.detail = limit, detail  # detail: the worker's stderr, for the log only


def compile_into_cache(job: dict) -> str | None:
    """Check and compile the grammar a job names into its cache folder; the refusal, if any."""
    from ...engine.compile import wait_for_cache_writes
    from .grammar_library import GrammarLibrary, check_grammar
    from .request import GrammarSpec
    from ..tokenizer import shared_vocabulary

    spec = GrammarSpec(name=job.get("name"), text=job.get("text"), start=job.get("start"), schema=job.get("schema"),
                       whitespace=job.get("whitespace"), property_order=job.get("property_order"))
    try:
        if spec.schema is None:  # a schema's checks are its compile's first phases: not run twice
            check_grammar(spec)
        if job.get("vocab_file"):  # the parent's Vocabulary (no tokenizer load: seconds saved)
            with open(job["vocab_file"], "rb") as f:
                vocab = pickle.load(f)
        else:
            _, vocab = shared_vocabulary(job["tokenizer"], job.get("model_vocab_size"))
        GrammarLibrary(vocab, cache=job["cache"]).build(spec, eager=bool(job.get("eager")))
    except RequestError as e:
        return str(e)
    finally:
        wait_for_cache_writes()  # the parent loads the file once we answer
    return None


def main() -> int:
    job = json.load(sys.stdin)
    try:
        answer = {"error": compile_into_cache(job), "limit": None}
    except MemoryError:
        answer = {"error": "the grammar compile ran out of memory", "limit": "compile_memory_bytes"}
    print(json.dumps(answer), flush=True)
    return 0


def _limit_of(returncode: int, wall: bool) -> tuple[str, str]:
    """(limit, what happened) for a worker that ended without an answer."""
    if wall:
        return "compile_timeout_s", "ran past its wall-time limit and was killed"
    if returncode == -signal.SIGXCPU or returncode == -signal.SIGKILL:
        return "compile_cpu_s", "ran past its CPU-time limit"
    if returncode == -signal.SIGXFSZ:
        return "max_store_bytes", "tried to write a cache file larger than allowed"
    return "compile_memory_bytes", f"died (status {returncode}), most likely out of its memory limit"


def run_compile_worker(job: dict, limits: ServerLimits) -> None:
    """Compile `job` in a worker process under `limits`. Raises :class:`CompileRefused` (a
    :class:`~cad_outlines.errors.RequestError`, HTTP 400) with the grammar's refusal or the
    limit it ran past, whose message names the limit and its environment variable."""
    root = str(Path(__file__).resolve().parents[3])  # where this cad_outlines is imported from
    env = {**os.environ, **limits.env(),  # the worker's server_limits(): these, its compile limits included
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    args = [sys.executable, "-c", _BOOTSTRAP, str(int(limits.compile_memory_bytes)), str(int(limits.compile_cpu_s)),
            str(int(limits.max_store_bytes)), str(min(int(limits.compile_nice), 19))]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, process_group=0)
    wall = False
    try:
        out, err = proc.communicate(json.dumps(job), timeout=limits.compile_timeout_s)
    except subprocess.TimeoutExpired:
        wall = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    if job.get("schema") is not None and job.get("cache"):  # a worker killed mid-build leaves its folder
        from .grammar_library import remove_schema_builds

        remove_schema_builds(job["cache"], proc.pid)
    answer = None
    if not wall:
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (IndexError, ValueError):
            answer = None
    if isinstance(answer, dict) and "error" in answer:
        if answer["error"] is None:
            return
        if not answer.get("limit"):
            raise CompileRefused(answer["error"])
        limit, what = answer["limit"], "ran out of memory"
    else:
        limit, what = _limit_of(proc.returncode, wall)
    raise CompileRefused(f"grammar compile refused: the worker {what} after {time.monotonic() - t0:.1f} s "
                         f"({limit} = {getattr(limits, limit)}; the server operator sets it with "
                         f"{env_name(limit)})", limit, detail=(err or "").strip()[-2000:])


if __name__ == "__main__":
    raise SystemExit(main())
