"""The kernel study's forward helpers and its CSV, on a tiny random Qwen2 (fp32, CPU)."""

from __future__ import annotations

import argparse
import csv

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from analysis import kernel  # noqa: E402

PREFIX, K = 24, 9


@pytest.fixture(scope="module")
def model():
    return kernel.build_model("tiny", "fp32", "cpu", seed=0)


@pytest.fixture(scope="module")
def ids():
    gen = torch.Generator().manual_seed(1)
    return torch.randint(0, kernel.CONFIGS["tiny"]["vocab_size"], (1, PREFIX + 2 * K), generator=gen)


def _prefilled(model, ids):
    cache = kernel.new_cache(model)
    kernel.forward(model, ids[:, :PREFIX], cache)
    assert kernel.cache_len(cache) == PREFIX
    return cache


@torch.inference_mode()
def test_k_token_forward_equals_k_single_steps(model, ids):
    span = ids[:, PREFIX:PREFIX + K]
    cache = _prefilled(model, ids)
    parallel = kernel.prefill(model, span, cache, last_only=False)
    assert parallel.shape[1] == K and kernel.cache_len(cache) == PREFIX + K

    cache = _prefilled(model, ids)
    steps = torch.cat([kernel.forward(model, span[:, i:i + 1], cache) for i in range(K)], dim=1)
    assert kernel.cache_len(cache) == PREFIX + K
    torch.testing.assert_close(parallel, steps, atol=1e-5, rtol=1e-5)
    # last_only gives the last position's logits of the same forward
    cache = _prefilled(model, ids)
    last = kernel.prefill(model, span, cache)
    assert last.shape[1] == 1
    torch.testing.assert_close(last[:, -1], parallel[:, -1], atol=1e-5, rtol=1e-5)


@torch.inference_mode()
def test_crop_restores_the_prefix(model, ids):
    cache = _prefilled(model, ids)
    kernel.prefill(model, ids[:, PREFIX:PREFIX + K], cache)  # something to throw away
    kernel.decode_steps(model, ids[:, PREFIX + K:PREFIX + K + 3], cache)
    assert kernel.cache_len(cache) == PREFIX + K + 3
    kernel.crop_cache(cache, PREFIX)
    assert kernel.cache_len(cache) == PREFIX

    other = ids[:, PREFIX + K:PREFIX + 2 * K]
    after_crop = kernel.prefill(model, other, cache, last_only=False)
    fresh = kernel.prefill(model, other, _prefilled(model, ids), last_only=False)
    torch.testing.assert_close(after_crop, fresh, atol=1e-6, rtol=1e-6)

    kernel.crop_cache(cache, PREFIX)  # and once more, after a decode run
    marks, logits = kernel.decode_steps(model, other, cache, checkpoints=[K])
    assert set(marks) == {K} and kernel.cache_len(cache) == PREFIX + K
    torch.testing.assert_close(logits[K], fresh[:, -1], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        kernel.crop_cache(cache, PREFIX + K + 1)


def test_decode_plan():
    ns = [1, 8, 16, 32, 64, 128, 256, 512]
    assert kernel.decode_plan(ns, trials=5, decode_trials=2) == [512, 512, 64, 64, 64]
    assert kernel.decode_plan([1, 4], trials=3, decode_trials=2) == [4, 4, 4]


def test_study_writes_the_csv(tmp_path):
    parser = argparse.ArgumentParser()
    kernel.add_arguments(parser)
    out_csv = tmp_path / "kernel_speedup.csv"
    ns = [1, 2, 4]
    args = parser.parse_args(["--configs", "tiny", "--dtypes", "fp32", "--ns", ",".join(map(str, ns)),
                              "--prefix", "16", "--trials", "2", "--decode-trials", "1", "--device", "cpu",
                              "--out-csv", str(out_csv), "--out-dir", str(tmp_path)])
    assert kernel.run(args) == 0
    with out_csv.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["config", "dtype", "device", "n", "t_prefill_ms", "t_decode_ms", "speedup"]
    keys = [(r["config"], r["dtype"], r["device"], int(r["n"])) for r in rows]
    assert keys == [("tiny", "fp32", "cpu", n) for n in ns]
    for r in rows:
        assert float(r["t_prefill_ms"]) > 0 and float(r["t_decode_ms"]) > 0
        assert float(r["speedup"]) == pytest.approx(float(r["t_decode_ms"]) / float(r["t_prefill_ms"]), rel=1e-3)
    report = (tmp_path / "kernel.md").read_text()
    assert "| 4 |" in report and "Reproduce:" in report

    # --merge keeps rows of other (config, dtype, device) and replaces the re-measured ones
    with out_csv.open("a", newline="") as f:
        f.write("other,bf16,cuda,8,1.0,8.0,8.0\n")
    args.merge = True
    assert kernel.run(args) == 0
    with out_csv.open(newline="") as f:
        keys = [(r["config"], r["device"], r["n"]) for r in csv.DictReader(f)]
    assert keys.count(("other", "cuda", "8")) == 1 and len(keys) == len(ns) + 1
