"""Outlines integration: our engine as an ``OutlinesLogitsProcessor``.

``outlines.Generator(model, processor=CFGLogitsProcessor(compiled))`` decodes under
the grammar. :func:`output_type_processor` turns any Outlines output type into that processor
the way ``outlines.Generator(model, output_type)`` turns it into its backend's: a Pydantic model,
dataclass, TypedDict or ``outlines.types.JsonSchema`` -> :func:`~cad_outlines.compile_json_schema`;
``outlines.types.CFG`` -> its Lark grammar; every other term (``outlines.types.Regex``, ``int``,
``Literal[...]``, ``types.Email``...) -> its regex as a one-terminal grammar (the whole output).
:func:`outlines_generator` returns the ``outlines.Generator`` itself; :func:`cfg_generator` does it for
a Lark grammar given by name, path or text.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from outlines.processors.base_logits_processor import OutlinesLogitsProcessor

from ..engine.compile import compile_grammar, compile_json_schema
from ..engine.compiled_grammar import CompiledGrammar
from ..engine.matcher import Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch
from ..engine.vocabulary import Vocabulary
from ..decoding.logits import apply_token_bitmask_inplace
from ..grammars import regex_grammar

__all__ = ["CFGLogitsProcessor", "cfg_generator", "outlines_generator", "output_type_processor",
           "vocabulary_for_outlines_model"]


class CFGLogitsProcessor(OutlinesLogitsProcessor):
    """Masks each step's logits to the tokens the grammar allows; one matcher per
    sequence in the batch, all masks computed in one native batch call (GIL released)
    and applied to a copy of the logits (the caller's tensor is left as it is). Each sequence advances and is masked independently; a
    sequence that has produced EOS may only repeat EOS (padding)."""

    def __init__(self, grammar: CompiledGrammar, tensor_library_name: str = "torch"):
        if tensor_library_name != "torch":
            raise NotImplementedError("CFGLogitsProcessor supports torch models")
        super().__init__(tensor_library_name)
        self.grammar = grammar
        self.matchers: list[Matcher] | None = None
        self._bitmask: np.ndarray | None = None

    def reset(self) -> None:
        self.matchers = None

    def process_logits(self, input_ids, logits):
        batch = input_ids.shape[0]
        if self.matchers is None:
            self.matchers = [Matcher(self.grammar) for _ in range(batch)]
        else:
            for matcher, row in zip(self.matchers, input_ids):
                if not matcher.is_finished():
                    matcher.advance(int(row[-1]))
        if self._bitmask is None or self._bitmask.shape[0] != batch:
            self._bitmask = allocate_token_bitmask(batch, self.grammar.vocab_size)
        eos_only = self._eos_only_row()
        for i, matcher in enumerate(self.matchers):
            if matcher.is_finished():
                self._bitmask[i] = eos_only
        fill_next_token_bitmask_batch([None if m.is_finished() else m for m in self.matchers], self._bitmask)
        if not self._bitmask.any(axis=1).all():
            raise ValueError("no token is allowed here: the grammar admits no continuation")
        out = logits.clone()  # the caller's tensor is never changed
        apply_token_bitmask_inplace(out, self._bitmask)
        return out

    def _eos_only_row(self) -> np.ndarray:
        row = np.zeros(self._bitmask.shape[1], dtype=np.int32)
        for t in self.grammar.eos_token_ids:
            row[t // 32] |= np.int32(np.uint32(1 << (t % 32)).view(np.int32))
        return row


def vocabulary_for_outlines_model(model) -> Vocabulary:
    """The vocabulary of an ``outlines.from_transformers`` model (padded to the
    model's logits size)."""
    hf_tokenizer = model.tokenizer.tokenizer
    size = getattr(getattr(model.model, "config", None), "vocab_size", None)
    return Vocabulary.from_tokenizer(hf_tokenizer, model_vocab_size=size)


def output_type_processor(model, output_type, **compile_options) -> CFGLogitsProcessor:
    """Our logits processor for an Outlines output type (what ``outlines.Generator(model, output_type)``
    takes: a Pydantic model, ``outlines.types.JsonSchema``, ``Regex``, ``CFG``, ``int``, ``Literal[...]``,
    ...), compiled for `model` (from ``outlines.from_transformers``). `compile_options` go to
    :func:`~cad_outlines.compile_json_schema` or :func:`~cad_outlines.compile_grammar` (``cache``,
    ``progress``, ``limits``, ...). A schema keyword or regex construct our engine cannot compile raises
    its :class:`~cad_outlines.errors.GrammarError` (or ``ValueError``) naming it; nothing falls back to
    unconstrained decoding."""
    from outlines.types import CFG, JsonSchema
    from outlines.types.dsl import python_types_to_terms, to_regex

    if output_type is None:
        raise ValueError("an output type is needed (None would decode unconstrained)")
    term = python_types_to_terms(output_type)
    vocab = vocabulary_for_outlines_model(model)
    if isinstance(term, CFG):
        compiled = compile_grammar(term.definition, vocab, **compile_options)
    elif isinstance(term, JsonSchema):
        if term.whitespace_pattern is not None:  # Outlines' whitespace regex: the front end takes one as `whitespace`
            compile_options = {"whitespace": term.whitespace_pattern, **compile_options}
        compiled = compile_json_schema(term.schema, vocab, **compile_options)
    else:
        compiled = compile_grammar(regex_grammar(to_regex(term), terminal="OUTPUT"), vocab, **compile_options)
    return CFGLogitsProcessor(compiled, model.tensor_library_name)


def outlines_generator(model, output_type, **compile_options):
    """``outlines.Generator(model, output_type)`` on our engine: the same generator object, its
    processor made by :func:`output_type_processor`."""
    import outlines

    return outlines.Generator(model, processor=output_type_processor(model, output_type, **compile_options))


def cfg_generator(model, grammar: str | Path, **compile_options):
    """An ``outlines.Generator`` for `model` (from ``outlines.from_transformers``)
    constrained by a Lark grammar (a shipped name, a path or text) through our engine."""
    import outlines

    compiled = compile_grammar(grammar, vocabulary_for_outlines_model(model), **compile_options)
    return outlines.Generator(model, processor=CFGLogitsProcessor(compiled, model.tensor_library_name))
