"""The embedded default model: a tiny random-weight Qwen2 with a byte-level tokenizer
built in code, so the demo runs the real decode loop with no download. Its weights are
random: what it shows is the mechanics and cost of the loop, not edit quality."""

from __future__ import annotations

__all__ = ["toy_model_and_tokenizer"]


def toy_model_and_tokenizer(seed: int = 0):
    """(Qwen2ForCausalLM, PreTrainedTokenizerFast): 256 byte tokens + <|endoftext|>."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from ..engine.vocabulary import bytes_to_unicode

    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    vocab["<|endoftext|>"] = 256
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=256, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).eval(), tokenizer
