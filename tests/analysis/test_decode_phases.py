"""The decode-phases study on a tiny random Qwen2 on the CPU: one row per run, contexts that grow
with --context-step, raw per-step times, the reproduce line, and its input errors."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from analysis.__main__ import main  # noqa: E402
from analysis import decode_phases  # noqa: E402


def test_every_condition_runs_and_is_reported(tmp_path, monkeypatch):
    argv = ["decode-phases", "--device", "cpu", "--config", "tiny", "--dtype", "fp32", "--steps", "3",
            "--rounds", "2", "--context", "8", "--context-step", "2", "--out-dir", str(tmp_path), "--no-plot"]
    monkeypatch.setattr("sys.argv", ["python -m analysis", *argv])
    assert main(argv) == 0
    runs = json.loads((tmp_path / "decode_phases.json").read_text())
    conditions = list(decode_phases.CONDITIONS)
    assert [r["condition"] for r in runs] == conditions * 2
    assert [r["context"] for r in runs] == [8 + 2 * i for i in range(2 * len(conditions))]
    for r in runs:
        assert len(r["wall"]) == len(r["launch"]) == len(r["wait"]) == 3 and r["gpu"] == []
        assert all(w >= lw for w, lw in zip(r["wall"], r["launch"]))
        assert r["segments"] == 0  # no CUDA here
    report = (tmp_path / "decode_phases.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and "condition" not in line]
    assert len(rows) == 2 * len(conditions)
    assert "--out-dir" not in report.splitlines()[2] and "--context-step 2" in report.splitlines()[2]
    assert torch.backends.cuda.cudnn_sdp_enabled()  # the no-cuDNN condition restores the flag


@pytest.mark.parametrize("argv, message", [
    (["--conditions", "read,bogus"], "unknown"),
    (["--steps", "1"], "--steps"),
])
def test_bad_options_say_which(argv, message, tmp_path):
    args = ["decode-phases", "--device", "cpu", "--config", "tiny", "--out-dir", str(tmp_path), *argv]
    with pytest.raises(SystemExit, match=message):
        main(args)


def test_cuda_without_a_gpu_says_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(SystemExit, match="no CUDA device"):
        main(["decode-phases", "--config", "tiny", "--out-dir", str(tmp_path)])
