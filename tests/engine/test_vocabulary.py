"""Vocabulary: exact token bytes, special/EOS ids and content hash for real tokenizers (GPT-2 and
stories260K vendored in tests/data; the others in the shared data folder)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import sysconfig
import unicodedata
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from cad_outlines.engine.vocabulary import Vocabulary

from tests.fixture_data import SMALL, require_shared

REPO = Path(__file__).resolve().parents[2]

SOURCES = {
    "qwen2.5": "tokenizers/qwen2.5",
    "gpt2": "tokenizers/gpt2",
    "llama3": "tokenizers/llama3",
    "starcoder": "tokenizers/starcoder",
    "phi3_mini": "tokenizers/phi3_mini",
    "llama2_sentencepiece": "tokenizers/llama2_sentencepiece",
    "stories260K": "models/stories260K_hf",
}
SENTENCEPIECE = {"phi3_mini", "llama2_sentencepiece", "stories260K"}
NAMES = list(SOURCES)


VENDORED = {"gpt2", "stories260K"}  # in tests/data; the others need the shared data folder


def _path(name: str) -> Path:
    return (SMALL if name in VENDORED else require_shared()) / SOURCES[name]


@lru_cache(maxsize=None)
def vocab(name: str) -> Vocabulary:
    return Vocabulary.from_tokenizer(_path(name))


class _Ref:
    """The reference tokenizer: encode(text) -> ids (no BOS/EOS), decode_each(ids) -> one string per id."""

    def __init__(self, name: str) -> None:
        if name == "llama2_sentencepiece":
            spm = pytest.importorskip("sentencepiece")
            self.sp = spm.SentencePieceProcessor(model_file=str(_path(name) / "tokenizer.model"))
            self.tok = None
        else:
            from tokenizers import Tokenizer

            self.tok = Tokenizer.from_file(str(_path(name) / "tokenizer.json"))

    def encode(self, text: str) -> list[int]:
        if self.tok is None:
            return self.sp.encode(text)
        return self.tok.encode(text, add_special_tokens=False).ids

    def strips_leading_space(self, i: int) -> bool:
        """Whether decoding token ``i`` alone drops a leading space (HF's Strip decoder always does; the
        sentencepiece library only removes a dummy-prefix "▁", not a byte piece <0x20>)."""
        return self.tok is not None or not self.sp.is_byte(i)

    def decode_each(self, ids: list[int]) -> list[str]:
        if self.tok is None:
            return self.sp.decode([[i] for i in ids])
        return self.tok.decode_batch([[i] for i in ids], skip_special_tokens=False)


@lru_cache(maxsize=None)
def ref(name: str) -> _Ref:
    return _Ref(name)


def _texts() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    code = (stdlib / "textwrap.py").read_text(encoding="utf-8")[:2500]
    code += (stdlib / "json" / "decoder.py").read_text(encoding="utf-8")[:1500]
    prose = (
        "Grüße aus Köln, naïve café — «ελληνικά» “quotes” 中文分词测试，日本語のテキスト。한국어 문장. "
        "עברית العربية हिन्दी ไทย Ωμέγα ∑ x² ≤ ∞ 𠀋𝔘𝔫𝔦 q\u0301 ﬁ\n"
    )
    emoji = "👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 🤖🦀 ✅\n"
    crlf = "line one\r\nline two\r\n\r\n\tindented\ttab\r\n  trailing  \r\n"
    spacing = "a  b   c    d\n\n\n    x = 1  \n\t\t}\n\x1b[31mred\x1b[0m \x00\x7f\n"
    full = unicodedata.normalize("NFC", code + prose + emoji + crlf + spacing + code[:500])
    return [full, prose, emoji, crlf, spacing, " leading space", "\nleading newline", "x", "  "]


TEXTS = _texts()


# ---------------------------------------------------------------- (a) encode -> our bytes round-trip


@pytest.mark.parametrize("name", NAMES)
def test_encoding_spells_the_text(name: str) -> None:
    v, r = vocab(name), ref(name)
    assert TEXTS[0].count("\n") > 50 and len(TEXTS[0].encode()) > 4000
    for text in TEXTS:
        ids = r.encode(text)
        assert not set(ids) & v.special_ids, "ordinary text must not produce special/unk ids"
        # SentencePiece's normaliser adds exactly one dummy-prefix space at the start of every text.
        expected = (b" " if name in SENTENCEPIECE else b"") + text.encode("utf-8")
        assert v.decode(ids) == expected


# ---------------------------------------------------------------- (b) single tokens agree with decode


@pytest.mark.parametrize("name", NAMES)
def test_single_tokens_match_tokenizer_decode(name: str) -> None:
    v, r = vocab(name), ref(name)
    ids, expected = [], []
    for i in range(v.tokenizer_size):
        if i in v.special_ids:
            continue
        try:
            s = v.token_bytes[i].decode("utf-8")
        except UnicodeDecodeError:
            continue  # a fragment of a multi-byte character: decode is lossy
        if name in SENTENCEPIECE and s.startswith(" ") and r.strips_leading_space(i):
            s = s[1:]  # the decoder strips one leading space at the start of a text; we do not
        ids.append(i)
        expected.append(s)
    assert len(ids) > 0.6 * (v.tokenizer_size - len(v.special_ids))
    got = r.decode_each(ids)
    bad = [(i, e, g) for i, e, g in zip(ids, expected, got) if e != g]
    assert not bad, bad[:10]


# ---------------------------------------------------------------- (c) special ids and EOS

EXPECTED_SPECIAL = {
    "qwen2.5": (set(range(151643, 151657)), (151645,)),  # <|endoftext|>..<|video_pad|>; EOS from tokenizer_config
    "gpt2": ({50256}, (50256,)),
    "llama3": (set(range(128000, 128256)), (128001,)),  # <|end_of_text|>
    "starcoder": (set(range(38)), (0,)),
    "phi3_mini": ({0, 1, 2, *range(32000, 32011)}, (32000,)),  # </s> is a non-special added token in the json
    "llama2_sentencepiece": ({0, 1, 2}, (2,)),
    "stories260K": ({0, 1, 2}, (2,)),  # EOS from generation_config.json
}
EXPECTED_SCHEME = {n: "sentencepiece" if n in SENTENCEPIECE else "byte_level" for n in NAMES}
EXPECTED_SIZE = {
    "qwen2.5": 151665,
    "gpt2": 50257,
    "llama3": 128256,
    "starcoder": 49152,
    "phi3_mini": 32011,
    "llama2_sentencepiece": 32000,
    "stories260K": 512,
}


@pytest.mark.parametrize("name", NAMES)
def test_special_and_eos(name: str) -> None:
    v = vocab(name)
    special, eos = EXPECTED_SPECIAL[name]
    assert v.special_ids == frozenset(special)
    assert v.eos_token_ids == eos
    assert v.scheme == EXPECTED_SCHEME[name]
    assert v.size == v.tokenizer_size == len(v.token_bytes) == EXPECTED_SIZE[name]
    assert all(v.token_bytes[i] == b"" for i in v.special_ids)
    assert all(v.token_bytes[i] for i in range(v.size) if i not in v.special_ids)


def test_specific_tokens() -> None:
    qwen = vocab("qwen2.5")
    assert {151643, 151645} <= qwen.special_ids
    assert qwen.token_bytes[151657] == b"<tool_call>" and 151657 not in qwen.special_ids  # added, not special
    assert qwen.token_bytes[151659] == b"<|fim_prefix|>" and 151659 not in qwen.special_ids
    assert qwen.token_bytes[220] == b" " and qwen.token_bytes[198] == b"\n"
    assert vocab("gpt2").token_bytes[220] == b" "
    for name in ("llama2_sentencepiece", "phi3_mini", "stories260K"):
        v = vocab(name)
        assert v.token_bytes[3] == b"\x00" and v.token_bytes[13] == b"\n"  # <0x00>, <0x0A>
        assert v.token_bytes[3 + 0xFF] == b"\xff"
    llama2 = vocab("llama2_sentencepiece")
    assert llama2.token_bytes[259] == b"  "  # "▁▁"
    assert llama2.token_bytes[278] == b" the"


def test_eos_override_and_extra_special() -> None:
    v = Vocabulary.from_tokenizer(_path("stories260K"), eos_token_ids=[2, 2], extra_special_ids=[100])
    assert v.eos_token_ids == (2,) and 100 in v.special_ids and v.token_bytes[100] == b""
    assert v != vocab("stories260K")
    qwen = vocab("qwen2.5")
    both = Vocabulary(qwen.token_bytes, qwen.special_ids, (151645, 151643), qwen.tokenizer_size, qwen.scheme)
    assert both.eos_token_ids == (151645, 151643) and both.content_hash != qwen.content_hash
    with pytest.raises(ValueError):
        Vocabulary.from_tokenizer(_path("stories260K"), eos_token_ids=[512])


def test_transformers_fast_tokenizer_matches_path_load() -> None:
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(_path("qwen2.5")))
    v = Vocabulary.from_tokenizer(tok)
    assert v.content_hash == vocab("qwen2.5").content_hash
    assert v.eos_token_ids == (tok.eos_token_id,)


def test_tokenizer_model_matches_transformers_conversion() -> None:
    pytest.importorskip("sentencepiece")
    pytest.importorskip("google.protobuf")
    transformers = pytest.importorskip("transformers")
    tok = transformers.LlamaTokenizerFast.from_pretrained(str(_path("llama2_sentencepiece")))
    v = Vocabulary.from_tokenizer(tok)
    assert v.scheme == "sentencepiece"
    assert v.token_bytes == vocab("llama2_sentencepiece").token_bytes
    assert v == vocab("llama2_sentencepiece")


def test_sentencepiece_processor_input() -> None:
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=str(_path("llama2_sentencepiece") / "tokenizer.model"))
    assert Vocabulary.from_tokenizer(sp) == vocab("llama2_sentencepiece")


def test_bare_tokenizer_eos_fallback() -> None:
    from tokenizers import Tokenizer

    v = Vocabulary.from_tokenizer(Tokenizer.from_file(str(_path("gpt2") / "tokenizer.json")))
    assert v.eos_token_ids == (50256,) and v == vocab("gpt2")


def test_unsupported_scheme() -> None:
    from tokenizers import Tokenizer, decoders, models

    tok = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    tok.decoder = decoders.WordPiece()
    with pytest.raises(ValueError, match="unsupported"):
        Vocabulary.from_tokenizer(tok, eos_token_ids=[0])
    with pytest.raises(TypeError):
        Vocabulary.from_tokenizer(object())


# ---------------------------------------------------------------- (d) content hash


def test_content_hash_stable_and_distinct() -> None:
    from tokenizers import Tokenizer

    hashes = {name: vocab(name).content_hash for name in NAMES}
    assert len(set(hashes.values())) == len(NAMES)
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in hashes.values())
    # An independent load through a different input type gives the same hash.
    bare = Tokenizer.from_file(str(_path("stories260K") / "tokenizer.json"))
    again = Vocabulary.from_tokenizer(bare, eos_token_ids=[2])
    assert again is not vocab("stories260K") and again.content_hash == hashes["stories260K"]
    # ...and so does another process with a different str hash seed.
    code = (
        "from cad_outlines.engine.vocabulary import Vocabulary; import sys; "
        "print(Vocabulary.from_tokenizer(sys.argv[1]).content_hash)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(_path("stories260K"))], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == hashes["stories260K"]


def test_pickle_roundtrip() -> None:
    v = vocab("qwen2.5")
    _ = v.content_hash, v.token_lengths, v.sorted_ids()
    blob = pickle.dumps(v)
    assert len(blob) < 3 * sum(map(len, v.token_bytes)) + 2_000_000  # no cached arrays in the pickle
    w = pickle.loads(blob)
    assert "content_hash" not in w.__dict__
    assert w == v and w.token_bytes == v.token_bytes and w.special_ids == v.special_ids and w.scheme == v.scheme


# ---------------------------------------------------------------- (e) padding to the model's vocab size


def test_padding_to_model_vocab_size() -> None:
    qwen = vocab("qwen2.5")
    padded = qwen.with_size(151936)
    assert padded.size == len(padded.token_bytes) == 151936 and padded.tokenizer_size == 151665
    assert set(range(151665, 151936)) <= padded.special_ids
    assert padded.special_ids - set(range(151665, 151936)) == qwen.special_ids
    assert padded.token_bytes[:151665] == qwen.token_bytes and padded.token_bytes[151700] == b""
    assert padded.content_hash != qwen.content_hash
    assert np.array_equal(padded.sorted_ids(), qwen.sorted_ids())
    assert padded.with_size(151665) == qwen

    stories = Vocabulary.from_tokenizer(_path("stories260K"), model_vocab_size=520)
    assert stories.size == 520 and stories == vocab("stories260K").with_size(520)
    with pytest.raises(ValueError):
        Vocabulary.from_tokenizer(_path("stories260K"), model_vocab_size=500)


# ---------------------------------------------------------------- index helpers


def test_sorted_ids_and_lengths() -> None:
    v = vocab("llama2_sentencepiece")
    ids = v.sorted_ids()
    assert ids.dtype == np.int32 and not ids.flags.writeable
    keys = [(v.token_bytes[i], i) for i in ids]
    assert keys == sorted(keys)
    assert set(ids.tolist()) == set(range(v.size)) - v.special_ids
    assert v.token_lengths.tolist() == [len(b) for b in v.token_bytes]
    # Byte-fallback pieces duplicate single-character pieces: "<0x20>" and "▁" are both b" ".
    assert [i for i in ids if v.token_bytes[i] == b" "] == [35, 29871]

