"""Outlines integration with the real tiny model (stories260K, vendored in tests/data)."""

import json

import lark
import pytest
import regex

STORY = r"""
start: sentence+
sentence: subject verb object "."
subject: "Lily" | "Tom" | "The cat" | "The dog"
verb: "saw" | "had" | "liked"
object: "a ball" | "a tree" | "the sun" | "a big box"
%ignore " "
"""


@pytest.fixture(scope="module")
def outlines_model(small_data):
    import outlines
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = small_data / "models/stories260K_hf"
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    return outlines.from_transformers(model, tokenizer)


def test_outlines_generator_decodes_under_the_grammar(outlines_model, tmp_path):
    from cad_outlines.generators.outlines_processor import cfg_generator

    import torch

    torch.manual_seed(0)
    generator = cfg_generator(outlines_model, STORY, cache=tmp_path, progress=False)
    parser = lark.Lark(STORY, parser="lalr", lexer="basic")
    outputs = [generator("Once upon a time,", max_new_tokens=40, do_sample=True) for _ in range(3)]
    outputs.append(generator("Once upon a time,", max_new_tokens=40))
    # one sentence, spaces allowed between its terminals (the grammar ignores them)
    sentence = r" *(Lily|Tom|The cat|The dog) *(saw|had|liked) *(a ball|a tree|the sun|a big box) *\. *"
    for text in outputs:
        done, dot, tail = text.rpartition(".")
        if dot:
            parser.parse(done + ".")  # the whole sentences parse
        assert regex.fullmatch(sentence, tail, partial=True), (text, tail)  # the rest starts one


def test_processor_never_masks_in_place(outlines_model, tmp_path):
    import torch

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.generators.outlines_processor import CFGLogitsProcessor, vocabulary_for_outlines_model

    compiled = compile_grammar(STORY, vocabulary_for_outlines_model(outlines_model), cache=tmp_path, progress=False)
    processor = CFGLogitsProcessor(compiled)
    logits = torch.zeros(2, 512)
    out = processor(torch.tensor([[1, 5], [1, 6]]), logits)
    assert (logits == 0).all()
    assert torch.isinf(out).any() and torch.isfinite(out).any(dim=-1).all()


def test_outlines_output_types_run_on_our_engine(outlines_model, tmp_path):
    """outlines.Generator(model, output_type) with our processor: a Pydantic model, a JSON Schema, a
    regex and a CFG; the tiny story model writes valid output only because the masks make it."""
    from typing import Literal

    import jsonschema
    import outlines
    import torch
    from pydantic import BaseModel, ConfigDict, Field

    from cad_outlines import CFGLogitsProcessor, outlines_generator

    class Pet(BaseModel):  # closed (additionalProperties: false), so a tiny model's output stays short
        model_config = ConfigDict(extra="forbid")
        name: str = Field(max_length=8)
        kind: Literal["cat", "dog", "bird"]
        happy: bool

    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": -9, "maximum": 99},
                                               "ok": {"type": "boolean"}},
              "required": ["n", "ok"], "additionalProperties": False}
    sentence = 'start: "Lily" " " ("saw" | "had") " " ("a ball" | "the sun") "."'
    checks = [
        (Pet, Pet.model_validate_json),
        (outlines.types.JsonSchema(schema), lambda text: jsonschema.validate(json.loads(text), schema)),
        (outlines.types.Regex(r"[0-9]{3}-[a-z]{2}"), lambda text: regex.fullmatch(r"[0-9]{3}-[a-z]{2}", text) or 1 / 0),
        (outlines.types.CFG(sentence), lambda text: lark.Lark(sentence, parser="lalr").parse(text)),
    ]
    for output_type, check in checks:
        generator = outlines_generator(outlines_model, output_type, cache=tmp_path, progress=False)
        assert isinstance(generator.logits_processor, CFGLogitsProcessor)  # ours, not an Outlines backend
        torch.manual_seed(0)
        for _ in range(3):
            text = generator("Once upon a time,", max_new_tokens=80, do_sample=True)
            check(text)


def test_an_output_type_our_engine_cannot_compile_is_refused_not_unconstrained(outlines_model):
    import outlines

    from cad_outlines import output_type_processor

    lookbehind = '{"type": "string", "pattern": "(?<=a)b"}'  # a valid schema; no exact grammar for it here
    with pytest.raises(ValueError, match="lookbehind"):
        output_type_processor(outlines_model, outlines.types.JsonSchema(lookbehind), cache=False)
    with pytest.raises(ValueError, match="output type"):
        output_type_processor(outlines_model, None)
