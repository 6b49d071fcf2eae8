"""The command line: the demo (embedded default) and the roundtrip study."""

from cad_outlines.cli import main
from cad_outlines.examples import load_examples


def test_demo_runs_offline_and_resolves_every_example(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("--- oracle program") == len(load_examples())
    assert "MISMATCH" not in out and "copy ceiling" in out
    assert out.count("--- decode loop") == len(load_examples())
    assert "sampled runs of the untrained embedded model" in out and out.count("--- seed ") == 4


def test_roundtrip_study_on_any_jsonl(tmp_path, capsys):
    import json

    rows = [{"task_id": "a", "meta": {"src": "x\ny\n"}, "dst": "x\nz\n"}, {"task_id": "b", "meta": {"src": ""}, "dst": "q"}]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    code = main(["study", "roundtrip", "--jsonl", str(path), "--before-field", "meta.src", "--after-field", "dst",
                 "--out-dir", str(tmp_path)])
    assert code == 0
    report = (tmp_path / "roundtrip.md").read_text()
    assert "| c | 2 | 2 | 100.00% |" in report


def test_analyze_writes_the_report(small_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    doc = tmp_path / "doc.json"
    doc.write_text('{"a": [1, true, null], "b": {"c": "d"}}')
    code = main(["analyze", str(small_data / "grammars" / "outlines" / "json.lark"), "--tokenizer",
                 str(small_data / "tokenizers" / "gpt2"), "--document", str(doc), "--out", str(tmp_path)])
    assert code == 0
    md = (tmp_path / "json.analysis.md").read_text()
    assert "## Mask-store rows after each step" in md and "Identical masks at" in md
    assert (tmp_path / "json.analysis.json").exists() and (tmp_path / "json.analysis.png").exists()
    assert "SynCode" in capsys.readouterr().out
