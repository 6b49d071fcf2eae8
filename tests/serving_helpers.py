"""Helpers shared by the serving test modules (they need vLLM: import this after ``importorskip("vllm")``):
a tiny random-weight model, the engine and server arguments, and a real server started on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ENGINE = dict(dtype="bfloat16", enforce_eager=True, max_model_len=2048, block_size=32,
              kv_cache_memory_bytes=256 * 2**20, enable_prefix_caching=True, seed=0)


CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def make_tiny_model(path, tokenizer_dir):
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    tok.chat_template = CHAT_TEMPLATE  # GPT-2's tokenizer has none; the chat routes need one
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def post(url, path, payload=None, *, data=None, timeout=60, method="POST"):
    """(status, parsed JSON or text) of one request to a server (`payload` as JSON, or raw `data`)."""
    body = data if data is not None else json.dumps(payload).encode()
    req = urllib.request.Request(f"{url}{path}", data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw or b"{}")
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER_ARGS = ["--dtype", "bfloat16", "--enforce-eager", "--max-model-len", "2048", "--block-size", "32",
               "--kv-cache-memory-bytes", str(256 * 2**20), "--enable-prefix-caching", "--seed", "0"]


def kill_server(proc) -> None:
    """Kill the server and the engine processes it started (its own process group)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(60)


def start_server(cmd: list[str], env: dict, log: Path, what: str = "the vLLM server",
                 timeout_s: float = 600) -> tuple[subprocess.Popen, str]:
    """Start a server (its own process group, output into `log`) and wait until /health answers:
    (process, base url). Fails the test with the log's tail if it exits or does not come up."""
    port = cmd[cmd.index("--port") + 1]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5):
                return proc, url
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.time() > deadline:
                kill_server(proc)
                pytest.fail(f"{what} did not come up:\n{log.read_text()[-4000:]}")
            time.sleep(2)


@contextlib.contextmanager
def grammar_cache(cache_dir: Path):
    """Grammars compiled in this process go to `cache_dir` (``CAD_OUTLINES_CACHE``) inside the block; the
    session's folder (tests/conftest.py) is restored after, so later tests never write into the user's cache."""
    previous_cache = os.environ.get("CAD_OUTLINES_CACHE")
    os.environ["CAD_OUTLINES_CACHE"] = str(cache_dir)
    try:
        yield
    finally:
        if previous_cache is None:
            os.environ.pop("CAD_OUTLINES_CACHE", None)
        else:
            os.environ["CAD_OUTLINES_CACHE"] = previous_cache


@contextlib.contextmanager
def async_engine(tiny_model, cache_dir: Path):
    """(AsyncLLM over `tiny_model` with our logits processor, its event loop): every test runs on this one
    loop. Grammars are cached in `cache_dir` (:func:`grammar_cache`)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from cad_outlines.serving.constraints.vllm_processor import CadLogitsProcessor

    with grammar_cache(cache_dir):
        loop = asyncio.new_event_loop()
        try:
            async def start():
                return AsyncLLM.from_engine_args(AsyncEngineArgs(model=str(tiny_model),
                                                                 logits_processors=[CadLogitsProcessor], **ENGINE))

            engine = loop.run_until_complete(start())
            yield engine, loop
            engine.shutdown()
        finally:
            loop.close()


@contextlib.contextmanager
def blocking_llm(tiny_model, cache_dir: Path):
    """vLLM's blocking ``LLM`` over `tiny_model` with our logits processor, shut down after. Grammars are
    cached in `cache_dir` (:func:`grammar_cache`)."""
    from vllm import LLM

    from cad_outlines.serving.constraints.vllm_processor import CadLogitsProcessor

    with grammar_cache(cache_dir):
        llm = LLM(model=str(tiny_model), logits_processors=[CadLogitsProcessor], **ENGINE)
        yield llm
        llm.llm_engine.engine_core.shutdown()
