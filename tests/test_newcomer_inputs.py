"""The library as a careless newcomer calls it (issue 21): wrong types, misspelt grammar names,
out-of-range sampling values and a half-filled bitmask each get one clear error or the
documented behaviour, never a raw AttributeError, a silent fallback or a fully masked row."""

import numpy as np
import pytest

from cad_outlines import (EditProgram, GrammarError, compile_grammar, extract_program, parse_program, resolve,
                          resolve_text)
from cad_outlines.edits import StreamingResolver
from cad_outlines.errors import CadOutlinesError, ParameterError
from cad_outlines.grammars import available_grammars, grammar_source

DOC = "a = 1\nb = 2\n"


@pytest.mark.parametrize("call, words", [
    (lambda: resolve_text(None, DOC), ["resolve_text", "answer", "str", "NoneType"]),
    (lambda: resolve_text("<program></program>", None), ["resolve_text", "document", "str", "NoneType"]),
    (lambda: parse_program(5), ["parse_program", "text", "str", "int"]),
    (lambda: parse_program(b"<gen>x</gen></program>"), ["parse_program", "text", "bytes", "decode"]),
    (lambda: resolve_text(b"<program></program>", DOC), ["answer", "bytes", "decode"]),
    (lambda: resolve_text("<program></program>", DOC.encode()), ["document", "bytes", "decode"]),
    (lambda: resolve("<program></program>", b"x"), ["resolve", "document", "bytes", "decode"]),
    (lambda: resolve(b"</program>", DOC), ["resolve", "program", "bytes", "decode"]),
    (lambda: resolve(42, DOC), ["resolve", "program", "EditProgram", "int"]),
    (lambda: extract_program(["<program>"]), ["extract_program", "answer", "list"]),
    (lambda: StreamingResolver(None), ["StreamingResolver", "document", "NoneType"]),
    (lambda: grammar_source(b"start: A"), ["grammar", "bytes", "decode"]),
    (lambda: grammar_source(7), ["grammar", "int"]),
])
def test_wrong_types_are_a_type_error_naming_parameter_and_type(call, words):
    """`resolve_text(None, doc)` raised AttributeError, `parse_program(5)` "'int' object has no
    attribute 'startswith'", bytes a bare TypeError."""
    with pytest.raises(TypeError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


@pytest.mark.parametrize("typo, meant", [("jsno", "json"), ("pyhton", "python"), ("copy-edit", "copy_edit"),
                                         ("sqll", "sql")])
def test_a_misspelt_grammar_name_says_did_you_mean(typo, meant, tmp_path):
    """`compile_grammar("jsno", ...)` compiled "jsno" as grammar text and failed in lark."""
    with pytest.raises(GrammarError) as info:
        grammar_source(typo)
    msg = str(info.value)
    assert f"did you mean {meant!r}" in msg and repr(typo) in msg
    assert ", ".join(available_grammars()) in msg
    from tests.helpers import ToyVocab

    with pytest.raises(GrammarError, match=f"did you mean {meant!r}"):
        compile_grammar(typo, ToyVocab.make(), cache=tmp_path, progress=False)


def test_a_name_close_to_nothing_lists_the_shipped_grammars():
    with pytest.raises(GrammarError) as info:
        grammar_source("xyzzy")
    assert "did you mean" not in str(info.value) and ", ".join(available_grammars()) in str(info.value)
    assert grammar_source('start: "a"').text == 'start: "a"'  # one line with a definition is grammar text
    # ... and so is a lone directive (lark's test_cache grammar `%import .grammars.ab (startab, expr)`)
    assert grammar_source("\n  %import .grammars.ab (startab, expr)\n").text.strip().startswith("%import")


@pytest.mark.parametrize("text", ["", "\n\n", "// only a comment\n   \n"])
def test_an_empty_grammar_says_it_is_empty(text, tmp_path):
    """An empty grammar said `rules that could start: ;`."""
    with pytest.raises(GrammarError, match="the grammar is empty") as info:
        grammar_source(text)
    assert "could start" not in str(info.value)
    path = tmp_path / "empty.lark"
    path.write_text(text)
    with pytest.raises(GrammarError, match="the grammar is empty") as info:
        grammar_source(path)
    assert "empty.lark" in str(info.value)


def test_a_grammar_with_only_terminals_says_it_has_no_rules(tmp_path):
    from cad_outlines.errors import GrammarCompileError
    from tests.helpers import ToyVocab

    with pytest.raises(GrammarCompileError, match="the grammar defines no rules") as info:
        compile_grammar('A: "a"\n%ignore " "\n', ToyVocab.make(), cache=False, progress=False)
    assert "could start" not in str(info.value)


def test_partial_resolve_keeps_the_text_of_an_open_gen_op():
    """`resolve_text("<program><gen>abc", doc, partial=True)` returned '' (dropping 'abc')."""
    assert resolve_text("<program><gen>abc", DOC, partial=True) == "abc"
    assert resolve_text('Sure: <program><copy lines="2-2"/>\n<gen>c = 3', DOC, partial=True) == "b = 2\nc = 3"
    program = parse_program("<gen>abc", partial=True)
    assert program == EditProgram([], complete=False, trailing="<gen>abc")
    assert resolve(program, DOC, partial=True) == "abc"


@pytest.mark.parametrize("kwargs, words", [
    ({"temperature": -1}, ["temperature", ">= 0", "-1"]),
    ({"temperature": float("nan")}, ["temperature", "finite", "nan"]),
    ({"temperature": float("inf")}, ["temperature", "finite", "inf"]),
    ({"top_p": 0}, ["top_p", "(0, 1]", "0"]),
    ({"top_p": 2}, ["top_p", "(0, 1]", "2"]),
    ({"top_p": -1}, ["top_p", "(0, 1]", "-1"]),
    ({"top_p": float("nan")}, ["top_p", "nan"]),
    ({"seed": -1}, ["seed", ">= 0", "-1"]),
    ({"seed": 1.5}, ["seed", "int", "1.5"]),
])
def test_sampling_refuses_values_out_of_range(kwargs, words):
    """Sampling(temperature=-1), top_p=2, seed=-1 were accepted; nan and top_p=0 failed later inside torch."""
    from cad_outlines.generators.copy_decode import Sampling

    with pytest.raises(ParameterError) as info:
        Sampling(**kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, CadOutlinesError)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_sampling_accepts_its_range():
    from cad_outlines.generators.copy_decode import Sampling

    for kwargs in ({}, {"temperature": 0.7, "top_p": 0.9, "seed": 3}, {"temperature": 2, "top_p": 1},
                   {"temperature": np.float32(0.5), "seed": np.int64(4)}):
        Sampling(**kwargs)


def test_bitmask_rows_no_matcher_fills_allow_everything():
    """allocate_token_bitmask returned zeros where llguidance's returns -1 (all allowed), so a None row in a
    batch masked every logit to -inf."""
    import torch

    from cad_outlines import Matcher, allocate_token_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmask_batch
    from tests.helpers import ToyVocab

    vocab = ToyVocab.make()
    grammar = compile_grammar("json", vocab, cache=False, progress=False)
    bitmask = allocate_token_bitmask(3, vocab.size)
    assert bitmask.dtype == np.int32 and bitmask.shape == (3, (vocab.size + 31) // 32) and (bitmask == -1).all()
    fill_next_token_bitmask_batch([None, Matcher(grammar), None], bitmask)
    assert (bitmask[0] == -1).all() and (bitmask[2] == -1).all()
    logits = torch.randn(3, vocab.size)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.equal(logits[0], before[0]) and torch.equal(logits[2], before[2])  # unconstrained rows
    allowed = torch.from_numpy(Matcher(grammar).allowed_mask())
    assert 0 < int(allowed.sum()) < vocab.size
    assert torch.equal(torch.isfinite(logits[1]), allowed)


def test_bitmask_application_leaves_padding_columns_of_free_rows_alone():
    """Issue 29: logits wider than the vocabulary (GPT-2: 50,257 ids, 50,304 columns): a None row's padding
    columns became -inf; a filled row's stay disallowed (ids the grammar does not know)."""
    import torch

    from cad_outlines import Matcher, allocate_token_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmask_batch
    from tests.helpers import ToyVocab

    vocab = ToyVocab.make()
    grammar = compile_grammar("json", vocab, cache=False, progress=False)
    bitmask = allocate_token_bitmask(2, vocab.size)
    fill_next_token_bitmask_batch([None, Matcher(grammar)], bitmask)
    width = bitmask.shape[1] * 32 + 47  # wider than the bitmask's bits
    logits = torch.randn(2, width)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.equal(logits[0], before[0])
    assert torch.isinf(logits[1, vocab.size:]).all()
    alone = before[:1].clone()  # a batch of free rows only, and a single 1-d row
    apply_token_bitmask_inplace(alone, bitmask[:1])
    assert torch.equal(alone, before[:1])


def test_copy_editor_refuses_a_tokenizer_that_is_not_the_models(tiny):
    """Both mismatches, in one line: more tokens than the model has rows, and far fewer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from cad_outlines.generators.copy_decode import CopyEditor

    _, tokenizer = tiny  # 512 tokens
    for rows, words in ((5000, "far more than padding"), (300, "ids past the model's vocabulary")):
        model = LlamaForCausalLM(LlamaConfig(vocab_size=rows, hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
        with pytest.raises(ParameterError, match="does not belong to this model") as info:
            CopyEditor(model, tokenizer, cache=False)
        assert words in str(info.value) and len(str(info.value).splitlines()) == 1


def test_execute_with_the_instruction_where_the_program_belongs_says_they_are_swapped(editor):
    doc = "a\nb\n"
    with pytest.raises(ParameterError, match="look swapped"):
        editor.execute(doc, "Rename a to c", '<copy lines="1-2"/></program>')
    assert editor.execute(doc, '<copy lines="1-2"/></program>', "Rename a to c").text == doc
