"""The JSON Schema corpus studies end to end on corpora of a few files (no clone of the real ones needed):
schema-coverage counts what compiles and names each refusal; schema-test-suite reports the suite's verdicts."""

from __future__ import annotations

import json

import pytest

from analysis.__main__ import main


def test_schema_coverage_counts_compiles_and_names_refusals(tmp_path, capsys):
    data = tmp_path / "jsb" / "maskbench" / "data"
    data.mkdir(parents=True)
    schemas = {"Kubernetes---a.json": {"type": "object", "properties": {"x": {"type": "integer"}}},
               "Kubernetes---b.json": {"type": "array", "uniqueItems": True},
               "BFCL_simple_3.json": {"enum": ["a", "b"]}}
    for name, schema in schemas.items():
        (data / name).write_text(json.dumps({"schema": schema, "tests": []}))
    assert main(["schema-coverage", "--jsb", str(tmp_path / "jsb"), "--out-dir", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "schema_coverage.md").read_text()
    assert "MaskBench: 2 of 3 schemas compile" in report
    assert "| Kubernetes | 2 | 1 | 50.0% |" in report and "| BFCL_simple | 1 | 1 | 100.0% |" in report
    assert "| `uniqueItems` | 1 | Kubernetes---b.json: keyword uniqueItems" in report



def test_schema_coverage_teacher_forces_instances_and_lists_wrong_verdicts(tmp_path):
    """--instances: each instance of a compiled schema is checked byte by byte; an instance in another key
    order is a false rejection in declared order and none in any order; a lone surrogate is unchecked."""
    data = tmp_path / "jsb" / "maskbench" / "data"
    data.mkdir(parents=True)
    obj = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 2}, "b": {"type": "string"}},
           "required": ["a"]}
    tests = [({"b": "x", "a": 3}, True), ({"a": 1}, False), ({"a": 2, "b": "\ud800"}, True)]
    (data / "Kubernetes---a.json").write_text(json.dumps({"schema": obj, "tests": [{"data": d, "valid": v}
                                                                                  for d, v in tests]}))
    for order, wrong in (("declared", 1), ("any", 0)):
        out = tmp_path / order
        assert main(["schema-coverage", "--jsb", str(tmp_path / "jsb"), "--out-dir", str(out), "--instances",
                     "--property-order", order]) == 0
        report = (out / "schema_coverage.md").read_text()
        assert f"| all | 1 | 0 | 2 | {wrong} | 1 | 0 | 1 |" in report
        assert ("Kubernetes---a.json instance 0: valid, rejected" in report) == bool(wrong)

def test_schema_test_suite_reports_verdicts_and_refusals(tmp_path):
    folder = tmp_path / "suite" / "tests" / "draft7"
    folder.mkdir(parents=True)
    groups = [{"description": "maximum", "schema": {"maximum": 3},
               "tests": [{"description": "below", "data": 2, "valid": True},
                         {"description": "above", "data": 4, "valid": False}]},
              {"description": "unique", "schema": {"uniqueItems": True},
               "tests": [{"description": "dup", "data": [1, 1], "valid": False}]}]
    (folder / "mixed.json").write_text(json.dumps(groups))
    assert main(["schema-test-suite", "--suite", str(tmp_path / "suite"), "--drafts", "draft7",
                 "--out-dir", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "schema_test_suite.md").read_text()
    assert "2 groups, 1 refused (1 tests); of 2 tests checked: 2 right" in report
    assert "**0 false rejections, 0 false admissions**" in report and "`uniqueItems` 1" in report


@pytest.mark.shared_data
def test_maskbench_compares_engines_on_common_schemas_and_breaks_ours_down_by_phase(tmp_path):
    """The maskbench study end to end on three schemas, ours beside llguidance (GPT-2): the correctness
    columns count instances, the common-schema table takes the schemas both compiled, and ours' time to
    first mask is split into the compile's phases and the first fill."""
    pytest.importorskip("llguidance")
    data = tmp_path / "jsb" / "maskbench" / "data"
    data.mkdir(parents=True)
    (tmp_path / "jsb" / "data").mkdir()
    obj = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 2}}, "required": ["a"]}
    cases = {"Kubernetes---a.json": (obj, [({"a": 3}, True), ({"a": 1}, False)]),
             "Kubernetes---b.json": ({"type": "array", "uniqueItems": True}, [([1, 2], True)]),
             "BFCL_simple_3.json": ({"enum": ["x", "y"]}, [("x", True), ("z", False)])}
    for name, (schema, tests) in cases.items():
        (data / name).write_text(json.dumps({"schema": schema, "tests": [{"data": d, "valid": v} for d, v in tests]}))
    out = tmp_path / "out"
    assert main(["maskbench", "--jsb", str(tmp_path / "jsb"), "--engines", "ours,llguidance", "--tokenizers", "gpt2",
                 "--jsb-per-category", "0", "--fresh", "--cache-dir", str(tmp_path / "cache"),
                 "--out-dir", str(out)]) == 0
    report = (out / "maskbench.md").read_text()
    # ours refuses uniqueItems; both compile the other two, exactly (0 of 2 valid rejected, 0 of 2 invalid admitted)
    assert "| all | ours | 2/3 | 0 |" in report and "| 0/2 | 0/2 |" in report
    common = report.split("## Time to first mask on the schemas every engine compiled")[1].split("##")[0]
    assert "| gpt2 | ours | 2 |" in common and "| gpt2 | llguidance | 2 |" in common
    phases = report.split("## Ours: where the time to first mask goes (MaskBench, gpt2, 2 schemas)")[1].split("##")[0]
    for phase in ("lark load", "lexer configurations", "parse tables", "flat arrays", "other compile work",
                  "first mask", "time to first mask"):
        assert f"| {phase} |" in phases


def test_schema_fuzz_finds_no_wrong_verdict_and_reports_one_it_is_shown(tmp_path, monkeypatch):
    """schema-fuzz: random schemas and instances against jsonschema; the engine agrees on a short seeded run,
    and a matcher that admits everything is caught (its wrong verdicts listed by case)."""
    import analysis.schema_fuzz as fuzz

    out = tmp_path / "out"
    assert main(["schema-fuzz", "--schemas", "120", "--seed", "7", "--instances", "12", "--walks", "4",
                 "--out-dir", str(out)]) == 0
    report = (out / "schema_fuzz.md").read_text()
    assert "| wrong verdicts | 0 |" in report and "| compiled | " in report
    monkeypatch.setattr(fuzz, "_verdict", lambda grammar, data: True)
    assert main(["schema-fuzz", "--schemas", "6", "--seed", "7", "--instances", "12", "--walks", "0",
                 "--out-dir", str(out)]) == 0
    report = (out / "schema_fuzz.md").read_text()
    assert "| false admission | " in report and "Cases with a wrong verdict" in report


def test_schema_fuzz_token_walks_check_a_tokenizers_masks_against_the_byte_level_grammar(tmp_path):
    """--tokenizer: walks over a real tokenizer's masks agree with the byte-level grammar; masks of one
    schema checked against another schema's bytes are caught."""
    import random

    from analysis.schema_fuzz import token_walk
    from cad_outlines import Vocabulary, compile_json_schema
    from tests.fixture_data import SMALL

    out = tmp_path / "out"
    assert main(["schema-fuzz", "--schemas", "8", "--seed", "3", "--instances", "4", "--walks", "2",
                 "--tokenizer", str(SMALL / "tokenizers" / "gpt2"), "--token-walks", "2", "--out-dir", str(out)]) == 0
    report = (out / "schema_fuzz.md").read_text()
    assert "| wrong verdicts | 0 |" in report and "masks checked against the byte-level grammar |" in report
    tok = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")
    a = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    b = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}
    wrong: list[str] = []
    for seed in range(5):
        token_walk(compile_json_schema(a, tok, cache=False, whitespace="flexible"),
                   compile_json_schema(b, Vocabulary.of_bytes(), cache=False, whitespace="flexible"),
                   random.Random(seed), wrong)
    assert wrong and wrong[0].startswith("token mask:")
