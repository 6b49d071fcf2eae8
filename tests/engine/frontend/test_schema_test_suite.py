"""The JSON Schema front end against the official JSON Schema Test Suite (a suite written by others; its required
tests of drafts 2020-12, 7 and 4 are vendored beside this file): every group either compiles or is refused naming
a keyword, and every test of a compiled group gets the suite's verdict, byte by byte through the grammar (a
vocabulary of the 256 bytes). The only other outcomes allowed: a valid instance rejected only for its property
order (some order of its keys is accepted: the order is fixed, as in llguidance and xgrammar), and a verdict
that differs from the suite's as jsonschema's own does (formats asserted where 2019-09 on makes them
annotations; a metaschema without the validation vocabulary), the reference this front end follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.schema_test_suite import DRAFTS, check_group
from cad_outlines.engine.vocabulary import Vocabulary

SUITE = Path(__file__).parent / "json_schema_test_suite"


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.of_bytes()


@pytest.mark.parametrize("draft", ["draft2020-12", "draft7", "draft4"])
def test_every_required_test_of_the_suite_gets_its_verdict_or_a_named_refusal(vocab, draft):
    kinds: dict[str, int] = {}
    refused: dict[str, int] = {}
    wrong = []
    for f in sorted((SUITE / draft).glob("*.json")):
        for group in json.loads(f.read_text()):
            res = check_group(group, DRAFTS[draft], vocab, timeout=20.0)
            if "refused" in res:
                refused[res["refused"]] = refused.get(res["refused"], 0) + 1
                continue
            for t in res["tests"]:
                kinds[t["kind"]] = kinds.get(t["kind"], 0) + 1
                if t["kind"] in ("false rejection", "false admission"):
                    wrong.append((f.name, group["description"], t["description"], t["data"], t["kind"]))
    assert not wrong, wrong
    assert kinds["ok"] >= 500 and kinds.get("order", 0) <= 6, kinds  # most tests are checked, not refused
    assert "$ref" in refused  # remote references are refused, naming $ref
    if draft == "draft2020-12":
        assert refused.get("$dynamicRef") == 3  # dynamic scope: refused, never read as a plain $ref
        assert kinds.get("as jsonschema", 0) <= 12  # the format-annotation tests and one metaschema


def test_in_any_property_order_no_rejection_is_for_the_order(vocab):
    """property_order="any" on the same tests: the valid instances the declared order rejects are accepted,
    and no invalid one is admitted (the suite as an oracle of the any-order products)."""
    kinds: dict[str, int] = {}
    wrong = []
    for draft in ("draft2020-12", "draft7"):
        for name in ("properties.json", "required.json", "additionalProperties.json", "patternProperties.json",
                     "dependentRequired.json", "dependentSchemas.json", "dependencies.json", "minProperties.json",
                     "maxProperties.json", "unevaluatedProperties.json", "if-then-else.json", "oneOf.json",
                     "anyOf.json", "allOf.json", "not.json", "ref.json", "default.json", "propertyNames.json"):
            f = SUITE / draft / name
            if not f.is_file():
                continue
            for group in json.loads(f.read_text()):
                res = check_group(group, DRAFTS[draft], vocab, timeout=20.0, property_order="any")
                for t in res.get("tests", ()):
                    kinds[t["kind"]] = kinds.get(t["kind"], 0) + 1
                    if t["kind"] in ("false rejection", "false admission", "order"):
                        wrong.append((draft, name, group["description"], t["description"], t["data"], t["kind"]))
    assert not wrong, wrong
    assert kinds["ok"] >= 300, kinds


def test_contains_true_false_and_draft4_integers(vocab):
    """Three of the suite's findings, alone: `contains: true` asks for an item, `contains: false` rules arrays out
    (unless minContains is 0), and 1.0 is not an integer in draft 4 (it is from draft 6 on)."""
    from analysis.schema_test_suite import accepts
    from cad_outlines import compile_json_schema

    def lang(schema, texts):
        g = compile_json_schema(schema, vocab, cache=False, whitespace="flexible")
        return [accepts(g, t) for t in texts]

    assert lang({"contains": True}, ["[]", "[1]", "{}"]) == [False, True, True]
    assert lang({"contains": True, "minContains": 2, "maxContains": 3}, ["[1]", "[1, 2]", "[1, 2, 3, 4]"]) == \
        [False, True, False]
    assert lang({"contains": False}, ["[]", "[1]", "3"]) == [False, False, True]
    assert lang({"contains": False, "minContains": 0}, ["[]", "[1]"]) == [True, True]
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}
    assert lang(draft4, ["1", "1.0", "-3"]) == [True, False, True]
    assert lang({**draft4, "$schema": "http://json-schema.org/draft-07/schema#"}, ["1", "1.0"]) == [True, True]
