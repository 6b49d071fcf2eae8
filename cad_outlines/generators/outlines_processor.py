"""Outlines integration: our engine as an ``OutlinesLogitsProcessor``.

``outlines.Generator(model, processor=CFGLogitsProcessor(compiled))`` decodes under
the grammar; :func:`cfg_generator` compiles a grammar for an Outlines transformers
model and returns such a generator.
"""

from __future__ import annotations

from pathlib import Path

from outlines.processors.base_logits_processor import OutlinesLogitsProcessor

from ..engine.compile import compile_grammar
from ..engine.compiled import CompiledGrammar
from ..engine.matcher import Matcher
from ..engine.vocabulary import Vocabulary
from .logits import mask_logits

__all__ = ["CFGLogitsProcessor", "cfg_generator", "vocabulary_for_outlines_model"]


class CFGLogitsProcessor(OutlinesLogitsProcessor):
    """Masks each step's logits to the tokens the grammar allows; one matcher per
    sequence in the batch. After EOS a sequence may only repeat EOS (padding)."""

    def __init__(self, grammar: CompiledGrammar, tensor_library_name: str = "torch"):
        if tensor_library_name != "torch":
            raise NotImplementedError("CFGLogitsProcessor supports torch models")
        super().__init__(tensor_library_name)
        self.grammar = grammar
        self.matchers: list[Matcher] | None = None

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
        rows = []
        for matcher, row_logits in zip(self.matchers, logits):
            if matcher.is_finished():
                import numpy as np

                allowed = np.zeros(self.grammar.vocab_size, dtype=bool)
                allowed[list(self.grammar.eos_token_ids)] = True
            else:
                allowed = matcher.allowed_mask()
            rows.append(mask_logits(row_logits, allowed))
        import torch

        return torch.stack(rows)


def vocabulary_for_outlines_model(model) -> Vocabulary:
    """The vocabulary of an ``outlines.from_transformers`` model (padded to the
    model's logits size)."""
    hf_tokenizer = model.tokenizer.tokenizer
    size = getattr(getattr(model.model, "config", None), "vocab_size", None)
    return Vocabulary.from_tokenizer(hf_tokenizer, model_vocab_size=size)


def cfg_generator(model, grammar: str | Path, **compile_options):
    """An ``outlines.Generator`` for `model` (from ``outlines.from_transformers``)
    constrained by a Lark grammar (text or path) through our engine."""
    import outlines

    compiled = compile_grammar(grammar, vocabulary_for_outlines_model(model), **compile_options)
    return outlines.Generator(model, processor=CFGLogitsProcessor(compiled, model.tensor_library_name))
