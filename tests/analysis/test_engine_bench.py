"""The engine benchmark study end to end in --quick mode with tiny limits (GPT-2; json and copy_edit)."""

from __future__ import annotations

import importlib.util
import re

import pytest

pytest.importorskip("transformers")

from analysis import engine_bench  # noqa: E402
from cad_outlines.cli import main  # noqa: E402


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_inline_imports_matches_lark(small_data):
    path = small_data / "grammars" / "outlines" / "json.lark"
    text = path.read_text(encoding="utf-8")
    inlined, notes, local = engine_bench.inline_imports(text, [path.parent])
    assert not any(ln.startswith("%import") for ln in inlined.splitlines()) and local and notes
    assert engine_bench.check_inlined(text, inlined, engine_bench.GRAMMARS["json"], [path.parent]) == ""


def test_strip_priorities():
    assert engine_bench.strip_priorities("a.0: B\nB.5: \"x\"\n?c.-1: a\n") == "a: B\nB: \"x\"\n?c: a\n"


def test_quick_run_writes_report(data_dir, tmp_path):
    out = tmp_path / "out"
    rc = main(["study", "engine-bench", "--quick", "--max-tokens", "25", "--engine-budget", "5",
               "--out-dir", str(out), "--cache-dir", str(tmp_path / "cache")])
    report = (out / "engine.md").read_text(encoding="utf-8")
    assert rc == 0, report
    assert (out / "engine.png").stat().st_size > 0
    sections = {h: body for h, body in re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", report, re.S | re.M)}
    compile_rows = [ln for ln in sections["Compile and load"].splitlines() if ln.startswith("| ")][1:]
    ours_rows = [ln for ln in sections["Our engine: per-token mask time (microseconds)"].splitlines() if ln.startswith("| ")][1:]
    assert [r.split("|")[1:3] for r in compile_rows] == [[" json ", " gpt2 "], [" copy_edit ", " gpt2 "]]
    assert [r.split("|")[1:3] for r in ours_rows] == [[" json ", " gpt2 "], [" copy_edit ", " gpt2 "]]
    for row in compile_rows:  # lexer configs, store rows, cold seconds, warm seconds are numbers
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert int(cells[2]) > 0 and int(cells[3].replace(",", "")) > 0
        float(cells[4]), float(cells[7])
    for row in ours_rows:  # 25 forced tokens (one document cut by the cap: no EOS position)
        assert row.split("|")[4].strip() == "25"
    side = sections["Side by side on the same documents and tokens"]
    if _has("llguidance"):
        assert "| json | gpt2 | llguidance |" in side and "| copy_edit | gpt2 | llguidance |" in side
    if _has("xgrammar"):
        assert "| json | gpt2 | xgrammar |" in side
    assert sections["Teacher-forced tokens our engine rejected"].strip().startswith("None")
