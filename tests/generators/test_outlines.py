"""Outlines integration with the real tiny model (stories260K, vendored in tests/data)."""

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
