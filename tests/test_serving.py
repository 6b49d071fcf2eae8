"""Our processor and Copy-as-Decode on a real vLLM engine (CPU build): a tiny random
Qwen2-shaped model with the GPT-2 tokenizer, served on 127.0.0.1.

Skipped when vLLM is not importable (install it with ``pip install -e ".[vllm]"``)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed: pip install -e '.[vllm]' (see docs/serving.md)")

from cad_outlines import oracle_program, resolve, split_lines  # noqa: E402
from cad_outlines.edits.program import Copy  # noqa: E402
from cad_outlines.serving import PROCESSOR, ServedEditor, ServingError  # noqa: E402

pytestmark = pytest.mark.slow

BEFORE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef neg(a):\n    return -a\n"
AFTER = BEFORE.replace("a - b", "a + b")

# a small Python-like language whose sentences are at most ~70 tokens: every output ends
SMALL_PY = r'''
start: stmt~1..3
stmt: NAME "=" expr NL
expr: atom (OP atom)~0..2
atom: NAME | NUMBER
NAME: /[a-z]{1,6}/
NUMBER: /[1-9][0-9]{0,3}/
OP: "+" | "-" | "*"
NL: "\n"
'''


def make_tiny_model(path, tokenizer_dir):
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_model(data_dir, tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny_qwen2"), data_dir / "tokenizers" / "gpt2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ENGINE_ARGS = ["--dtype", "bfloat16", "--enforce-eager", "--max-model-len", "2048", "--block-size", "32",
               "--kv-cache-memory-bytes", str(256 * 2**20), "--enable-prefix-caching", "--seed", "0"]


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {**os.environ, "CAD_OUTLINES_CACHE": str(tmp_path_factory.mktemp("grammar_cache"))}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
           "--logits-processors", PROCESSOR, "--enable-prompt-tokens-details", *ENGINE_ARGS]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the vLLM server exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5):
                break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.time() > deadline:
                kill_server(proc)
                pytest.fail(f"the vLLM server did not come up:\n{log.read_text()[-4000:]}")
            time.sleep(2)
    yield proc, url, log
    kill_server(proc)


def kill_server(proc) -> None:
    """Kill the server and the engine processes it started (its own process group)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(60)


def complete(url, body, timeout=300):
    req = urllib.request.Request(f"{url}/v1/completions", data=json.dumps({"model": "tiny", **body}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_grammar_by_text_over_http_gives_sentences_lark_parses(server):
    import lark

    _, url, _ = server
    parser = lark.Lark(SMALL_PY, parser="lalr")
    results = {}

    def run(i):
        results[i] = complete(url, {"prompt": [100 + i, 200, 300], "max_tokens": 128, "temperature": 1.0,
                                    "seed": i, "vllm_xargs": {"cad_grammar_text": SMALL_PY}})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    plain = complete(url, {"prompt": [5, 6, 7], "max_tokens": 8, "temperature": 1.0, "seed": 1})
    for t in threads:
        t.join()
    for status, body in results.values():
        assert status == 200, body
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        parser.parse(choice["text"])  # raises if lark does not accept it
    assert plain[0] == 200 and plain[1]["choices"][0]["finish_reason"] == "length"


def test_json_by_name_and_a_bad_grammar_fails_alone(server):
    _, url, _ = server
    status, body = complete(url, {"prompt": [1, 2, 3], "max_tokens": 40, "temperature": 1.0, "seed": 3,
                                  "vllm_xargs": {"cad_grammar": "json"}})
    assert status == 200
    text = body["choices"][0]["text"]
    assert text.lstrip()[:1] in '{["-0123456789tfn', text
    status, body = complete(url, {"prompt": [1, 2, 3], "max_tokens": 8, "vllm_xargs": {"cad_grammar_text": "start: FOO\n"}})
    assert status == 400 and "FOO" in json.dumps(body), body
    status, body = complete(url, {"prompt": [1, 2, 3], "max_tokens": 8, "vllm_xargs": {"cad_grammar": "pyhton"}})
    assert status == 400 and "no shipped grammar" in json.dumps(body), body
    assert complete(url, {"prompt": [1, 2, 3], "max_tokens": 4})[0] == 200  # the server goes on


@pytest.fixture(scope="module")
def http_editor(server, tiny_model):
    _, url, _ = server
    return ServedEditor.from_server(url, "tiny", tiny_model)


def test_copy_as_decode_edit_over_http_resolves_with_prefix_cache_hits(http_editor):
    script = oracle_program(BEFORE, AFTER).to_text()
    events = list(http_editor.stream(BEFORE, "Fix add.", script=script))
    result = events[-1].result
    assert result.complete and result.text == AFTER, result.program_text
    copies = [e.op for e in events if isinstance(e.op, Copy)]
    assert len(copies) >= 2 and result.stats.requests == len(copies) + 1
    assert result.stats.cached_tokens > 0
    assert "".join(e.text for e in events) == AFTER


def test_sampled_edits_run_concurrently_with_spans_in_range(http_editor):
    results = http_editor.edit_many([(BEFORE, "Fix add."), (BEFORE.replace("\n", "\r\n"), "Fix add.")],
                                    max_new_tokens=40, temperature=1.0, seed=5)
    for r in results:
        n = len(split_lines(r.document))
        assert all(1 <= op.start <= op.end <= n for op in r.program.ops if isinstance(op, Copy))
        assert resolve(r.program, r.document, partial=True) == r.text
        assert r.complete or r.stop_reason == "max_new_tokens"


def test_a_server_dying_mid_edit_gives_a_clear_error_with_the_partial_program(server, http_editor):
    proc, _, _ = server
    script = oracle_program(BEFORE, AFTER).to_text()
    seen = []
    with pytest.raises(ServingError) as info:
        for event in http_editor.stream(BEFORE, "Fix add.", script=script):
            seen.append(event)
            if isinstance(event.op, Copy) and proc.poll() is None:
                kill_server(proc)  # the first copy closed: the server dies before the next request
    partial = info.value.partial
    assert partial is not None and not partial.complete
    assert list(partial.program.ops)[:1] == [Copy(1, 1)] and "partial program" in str(info.value)


def test_in_process_llm_edit_with_prefix_cache_hits(tiny_model, tmp_path_factory, monkeypatch):
    from vllm import LLM

    from cad_outlines.serving.vllm_processor import CadLogitsProcessor

    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path_factory.mktemp("grammar_cache_llm")))
    llm = LLM(model=str(tiny_model), dtype="bfloat16", enforce_eager=True, max_model_len=2048, block_size=32,
              kv_cache_memory_bytes=256 * 2**20, enable_prefix_caching=True, seed=0,
              logits_processors=[CadLogitsProcessor])
    editor = ServedEditor.from_llm(llm)
    result = editor.edit(BEFORE, "Fix add.", script=oracle_program(BEFORE, AFTER).to_text())
    assert result.complete and result.text == AFTER and result.stats.cached_tokens > 0
