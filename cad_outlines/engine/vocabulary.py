"""Token id -> exact bytes, for any Hugging Face tokenizer.

A :class:`Vocabulary` is what the constrained-decoding engine sees of a tokenizer: the bytes each id
stands for, the ids that are never allowed (special/control tokens, holes in the id space, padding up to
the model's logits size), and the EOS ids (the only special ids the engine ever allows).

Two schemes are supported, detected from the tokenizer's decoder / pre-tokenizer / model config:

* ``"byte_level"`` (GPT-2, Qwen2.5, Llama-3, StarCoder): a token's string is mapped back through the
  inverse of GPT-2's ``bytes_to_unicode`` table.
* ``"sentencepiece"`` (metaspace, optionally with byte fallback: Llama-2, Phi-3, tiny Llama models):
  a token's bytes are its piece, UTF-8 encoded, with the metaspace ``"▁"`` replaced by ``b" "``, and a
  byte-fallback piece ``"<0xAB>"`` is the single byte ``0xAB``. The decoder's strip of one leading space
  at the start of a text is *not* applied: the id sequence for ``"Hello"`` spells ``b" Hello"`` (the
  normaliser's dummy prefix), and the engine works on that byte string.

Added tokens that are not special are the literal UTF-8 bytes of their content (that is what the
tokenizer matches them against in raw text). Special tokens and never-allowed ids map to ``b""``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["Vocabulary", "bytes_to_unicode", "model_mismatch"]

Scheme = Literal["byte_level", "sentencepiece"]

_HASH_HEADER = b"cad_outlines.Vocabulary/v1\n"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# SentencePiece CONTROL/UNKNOWN pieces (<s>, </s>, <unk>, <pad>...) keep a tag-like name; a HF conversion may
# register them as *non-special* added tokens (Phi-3's </s>), so in the sentencepiece scheme an added token that
# also lives in the base vocabulary and looks like a tag is treated as a control token.
_TAG = re.compile(r"<[^<>\s]+>")
# Only used for a bare tokenizer with no config at all, first match wins.
_FALLBACK_EOS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<eos>", "<|eot_id|>")
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


@lru_cache(maxsize=1)
def model_mismatch(tokenizer_size: int, model_vocab_size: int | None, model_eos_ids=()) -> str | None:
    """Why a tokenizer of `tokenizer_size` tokens cannot be the tokenizer of a model whose embedding has
    `model_vocab_size` rows (and whose config names `model_eos_ids`), or None where it can be.

    Models pad their embedding past the tokenizer (Qwen2.5: 151,665 tokens, 151,936 rows; Phi-3: 32,011 and
    32,064; GPT-NeoX: 50,277 and 50,304), never by much: a gap of more than max(1,024, 2% of the rows) means
    another model's tokenizer, and so does a tokenizer with more tokens than the model has rows, or a model
    EOS id that the tokenizer does not have. Under another model's tokenizer the model still writes a
    grammatical answer, of the wrong tokens: an empty edit program deletes the whole document."""
    if model_vocab_size is None:
        return None
    if tokenizer_size > model_vocab_size:
        return (f"the tokenizer has {tokenizer_size} tokens but the model has {model_vocab_size} (its vocab_size): "
                "ids past the model's vocabulary would crash it")
    slack = max(1024, model_vocab_size // 50)
    if model_vocab_size - tokenizer_size > slack:
        return (f"the tokenizer has {tokenizer_size} tokens but the model has {model_vocab_size} (its vocab_size): "
                f"{model_vocab_size - tokenizer_size} more than the tokenizer, far more than padding (at most {slack})")
    eos = [model_eos_ids] if isinstance(model_eos_ids, int) else list(model_eos_ids or ())
    missing = [i for i in eos if isinstance(i, int) and not 0 <= i < tokenizer_size]
    if missing:
        return f"the model's EOS id {missing[0]} is not a token of this tokenizer ({tokenizer_size} tokens)"
    return None


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (as in ``tokenizers``' ByteLevel)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


@lru_cache(maxsize=1)
def _byte_level_table() -> dict[int, str]:
    """``str.translate`` table: byte-level char -> latin-1 char of its byte; any other char < 0x200 -> U+FFFF."""
    table = {c: "\uffff" for c in range(0x200)}
    table.update({ord(ch): chr(b) for b, ch in bytes_to_unicode().items()})
    return table


_BYTES: Vocabulary | None = None  # Vocabulary.of_bytes()


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Bytes of every token id of a model's output layer.

    ``token_bytes[i]`` is the exact byte string id ``i`` contributes to the output (``b""`` for special ids).
    ``special_ids`` are never allowed by the engine, except the ids in ``eos_token_ids`` (always a subset
    of ``special_ids``). ``tokenizer_size`` ids come from the tokenizer; ids from there up to ``size`` are
    padding (the model's logits may be wider than the tokenizer) and are in ``special_ids``.
    Equality and ``hash()`` follow :attr:`content_hash` (``scheme`` is informative only).
    """

    token_bytes: tuple[bytes, ...]
    special_ids: frozenset[int]
    eos_token_ids: tuple[int, ...]
    tokenizer_size: int
    scheme: Scheme

    def __post_init__(self) -> None:
        n = len(self.token_bytes)
        if not 0 < self.tokenizer_size <= n:
            raise ValueError(f"tokenizer_size {self.tokenizer_size} not in (0, {n}]")
        if any(not 0 <= i < n for i in self.special_ids):
            raise ValueError("special id out of range")
        if not self.eos_token_ids or not set(self.eos_token_ids) <= self.special_ids:
            raise ValueError(f"eos_token_ids {self.eos_token_ids} must be non-empty special ids")
        if any(self.token_bytes[i] for i in self.special_ids):
            raise ValueError("special ids must map to b''")

    # ------------------------------------------------------------------ construction

    @classmethod
    def of_bytes(cls) -> Vocabulary:
        """The 256 bytes, then an EOS (id 256): a text's tokens are its bytes, so a grammar compiled for it
        checks its language with almost none of a real vocabulary's work (one per process)."""
        global _BYTES
        if _BYTES is None:
            _BYTES = cls(token_bytes=tuple(bytes([b]) for b in range(256)) + (b"",), special_ids=frozenset({256}),
                         eos_token_ids=(256,), tokenizer_size=257, scheme="byte_level")
        return _BYTES

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: Any,
        model_vocab_size: int | None = None,
        *,
        eos_token_ids: Iterable[int] | None = None,
        extra_special_ids: Iterable[int] = (),
    ) -> Vocabulary:
        """Build from a ``tokenizer.json`` / ``tokenizer.model`` path, a directory holding one, a
        ``tokenizers.Tokenizer``, a transformers fast tokenizer or a ``sentencepiece.SentencePieceProcessor``.

        EOS ids, unless given: ``generation_config.json`` / ``config.json`` next to the tokenizer, else the
        tokenizer's eos token (``tokenizer_config.json`` / ``special_tokens_map.json`` / the transformers
        object / the SentencePiece trainer spec), else, for a bare ``tokenizers.Tokenizer``, the first special
        token named like an EOS (``<|endoftext|>``, ``<|end_of_text|>``, ``</s>``, ...). EOS ids are made
        special. ``model_vocab_size`` pads with never-allowed ids; ``extra_special_ids`` are also never allowed.
        """
        src = _load(tokenizer)
        token_bytes, special = src.token_bytes, set(src.special) | set(extra_special_ids)
        if eos_token_ids is not None:
            eos = tuple(dict.fromkeys(int(i) for i in eos_token_ids))
        else:
            eos = src.eos
        n_tok = len(token_bytes)
        size = n_tok if model_vocab_size is None else int(model_vocab_size)
        if size < n_tok:
            raise ValueError(f"model_vocab_size {size} < tokenizer size {n_tok}")
        if not eos:
            raise ValueError("no EOS token found; pass eos_token_ids")
        if any(not 0 <= i < size for i in (*eos, *special)):
            raise ValueError(f"eos / special ids out of range [0, {size})")
        special |= set(eos)
        special |= set(range(n_tok, size))
        tb = list(token_bytes) + [b""] * (size - n_tok)
        for i in special:
            tb[i] = b""
        return cls(tuple(tb), frozenset(special), eos, n_tok, src.scheme)

    def with_size(self, model_vocab_size: int) -> Vocabulary:
        """The same vocabulary padded to ``model_vocab_size`` ids (never allowed)."""
        if model_vocab_size < self.tokenizer_size:
            raise ValueError(f"model_vocab_size {model_vocab_size} < tokenizer size {self.tokenizer_size}")
        tb = self.token_bytes[: self.tokenizer_size] + (b"",) * (model_vocab_size - self.tokenizer_size)
        special = {i for i in self.special_ids if i < self.tokenizer_size}
        special |= set(range(self.tokenizer_size, model_vocab_size))
        return Vocabulary(tb, frozenset(special), self.eos_token_ids, self.tokenizer_size, self.scheme)

    # ------------------------------------------------------------------ views

    @property
    def size(self) -> int:
        """Number of ids (= width of the model's logits)."""
        return len(self.token_bytes)

    def __len__(self) -> int:
        return len(self.token_bytes)

    def decode(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``ids`` (special ids contribute nothing)."""
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)

    @cached_property
    def token_lengths(self) -> np.ndarray:
        """``int32[size]``: byte length of each token (0 for special ids)."""
        return np.fromiter(map(len, self.token_bytes), dtype=np.int32, count=len(self.token_bytes))

    @cached_property
    def _sorted_ids(self) -> np.ndarray:
        tb, special = self.token_bytes, self.special_ids
        ids = sorted((i for i in range(len(tb)) if tb[i] and i not in special), key=lambda i: (tb[i], i))
        out = np.asarray(ids, dtype=np.int32)
        out.setflags(write=False)
        return out

    def sorted_ids(self) -> np.ndarray:
        """``int32``: every allowable (non-special, non-empty) id, sorted by its bytes then id; read-only.

        Tokens sharing a prefix are contiguous, so a trie or a per-first-byte index is one linear scan.
        """
        return self._sorted_ids

    @cached_property
    def content_hash(self) -> str:
        """sha256 hex of a canonical encoding of token bytes, special ids, EOS ids and sizes."""
        h = hashlib.sha256(_HASH_HEADER)
        h.update(np.array([self.size, self.tokenizer_size, len(self.eos_token_ids)], dtype="<u8").tobytes())
        h.update(self.token_lengths.astype("<u4").tobytes())
        h.update(b"".join(self.token_bytes))
        h.update(np.array(sorted(self.special_ids), dtype="<u4").tobytes())
        h.update(np.array(self.eos_token_ids, dtype="<u4").tobytes())
        return h.hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self is other or self.content_hash == other.content_hash

    def __hash__(self) -> int:
        return hash(self.content_hash)

    def __repr__(self) -> str:
        return (
            f"Vocabulary(scheme={self.scheme!r}, size={self.size}, tokenizer_size={self.tokenizer_size}, "
            f"special={len(self.special_ids)}, eos={self.eos_token_ids}, hash={self.content_hash[:12]})"
        )

    def __getstate__(self) -> dict[str, Any]:
        # Fields only: cached arrays / hash are recomputed on demand after unpickling.
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ---------------------------------------------------------------------- loading


@dataclass
class _Source:
    token_bytes: list[bytes]
    special: set[int]
    eos: tuple[int, ...]
    scheme: Scheme


def _load(tokenizer: Any) -> _Source:
    if isinstance(tokenizer, (str, os.PathLike)):
        path = Path(tokenizer)
        if path.is_dir():
            if (path / "tokenizer.json").is_file():
                path = path / "tokenizer.json"
            elif (path / "tokenizer.model").is_file():
                path = path / "tokenizer.model"
            else:
                raise FileNotFoundError(f"no tokenizer.json or tokenizer.model in {path}")
        cfg = _DirConfig(path.parent)
        if path.suffix == ".json":
            from tokenizers import Tokenizer

            return _from_hf(Tokenizer.from_file(str(path)), cfg, set(), None)
        return _from_sp_proto(path.read_bytes(), cfg)
    if hasattr(tokenizer, "serialized_model_proto"):  # sentencepiece.SentencePieceProcessor
        return _from_sp_proto(tokenizer.serialized_model_proto(), _DirConfig(None))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # transformers fast tokenizer
        name = getattr(tokenizer, "name_or_path", "") or ""
        cfg = _DirConfig(Path(name) if name and Path(name).is_dir() else None, tokenizer_config=False)
        special = {int(i) for i in tokenizer.all_special_ids if i is not None}
        eos_id = tokenizer.eos_token_id
        return _from_hf(backend, cfg, special, None if eos_id is None else int(eos_id))
    if hasattr(tokenizer, "get_added_tokens_decoder") and hasattr(tokenizer, "decoder"):  # tokenizers.Tokenizer
        return _from_hf(tokenizer, _DirConfig(None), set(), None)
    raise TypeError(
        f"unsupported tokenizer {type(tokenizer).__name__}: pass a path, a tokenizers.Tokenizer, a transformers "
        "fast tokenizer or a SentencePieceProcessor"
    )


class _DirConfig:
    """The JSON configs next to a tokenizer file (all optional)."""

    def __init__(self, directory: Path | None, tokenizer_config: bool = True) -> None:
        self.dir = directory
        self.use_tokenizer_config = tokenizer_config

    def _json(self, name: str) -> dict[str, Any]:
        if self.dir is None or not (self.dir / name).is_file():
            return {}
        with open(self.dir / name, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}

    def model_eos_ids(self) -> tuple[int, ...]:
        """``eos_token_id`` of generation_config.json, else config.json."""
        for name in ("generation_config.json", "config.json"):
            eos = self._json(name).get("eos_token_id")
            if eos is not None:
                return tuple(dict.fromkeys(int(i) for i in (eos if isinstance(eos, list) else [eos])))
        return ()

    def special_strings(self) -> tuple[str | None, list[str]]:
        """(eos token, every declared special token string) from tokenizer_config / special_tokens_map."""
        if not self.use_tokenizer_config:
            return None, []
        eos: str | None = None
        out: list[str] = []
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            cfg = self._json(name)
            for key in (*_SPECIAL_KEYS, "additional_special_tokens", "extra_special_tokens"):
                val = cfg.get(key)
                vals = val if isinstance(val, list) else list(val.values()) if isinstance(val, dict) else [val]
                if key != "extra_special_tokens" and isinstance(val, dict):
                    vals = [val]  # {"content": "</s>", ...}
                strs = [v["content"] if isinstance(v, dict) else v for v in vals]
                strs = [s for s in strs if isinstance(s, str)]
                out += strs
                if key == "eos_token" and strs:
                    eos = strs[0]
        return eos, out


def _components(state: bytes | None, key: str) -> Iterator[dict[str, Any]]:
    """Flatten a serialised normalizer / pre-tokenizer / decoder (``Sequence`` nesting) into its parts."""
    if state is None:
        return
    stack = [json.loads(state)]
    while stack:
        c = stack.pop()
        if c is None:
            continue
        if c.get("type") == "Sequence":
            stack.extend(reversed(c.get(key, [])))
        else:
            yield c


def _detect_scheme(tok: Any) -> tuple[Scheme, str, bool]:
    """(scheme, metaspace char, byte fallback) from the tokenizer's config."""
    dec = list(_components(tok.decoder.__getstate__() if tok.decoder else None, "decoders"))
    pre = list(_components(tok.pre_tokenizer.__getstate__() if tok.pre_tokenizer else None, "pretokenizers"))
    norm = list(_components(tok.normalizer.__getstate__() if tok.normalizer else None, "normalizers"))
    types = {c["type"] for c in dec + pre}
    byte_fallback = bool(getattr(tok.model, "byte_fallback", False)) or any(c["type"] == "ByteFallback" for c in dec)
    if "ByteLevel" in types:
        return "byte_level", "", False
    for c in dec + pre:
        if c["type"] == "Metaspace":
            return "sentencepiece", c.get("replacement", "▁"), byte_fallback
    for c in dec:  # Replace("▁" -> " ") decoder, as written by transformers' Llama converter
        if c["type"] == "Replace" and c.get("content") == " " and "String" in c.get("pattern", {}):
            return "sentencepiece", c["pattern"]["String"], byte_fallback
    if byte_fallback or any(c["type"] in ("Prepend", "Replace") for c in norm):
        return "sentencepiece", "▁", byte_fallback
    raise ValueError(f"unsupported tokenizer scheme {sorted(types)}: only byte-level BPE and SentencePiece-style")


def _from_hf(tok: Any, cfg: _DirConfig, special: set[int], eos_id: int | None) -> _Source:
    """From a ``tokenizers.Tokenizer`` (plus the specials / EOS its transformers wrapper knows)."""
    scheme, meta, byte_fallback = _detect_scheme(tok)
    base = tok.get_vocab(with_added_tokens=False)
    added = tok.get_added_tokens_decoder()
    size = max([*base.values(), *added.keys()]) + 1
    out: list[bytes] = [b""] * size
    assigned = [False] * size
    if scheme == "byte_level":
        table = _byte_level_table()
        for s, i in base.items():
            try:
                out[i] = s.translate(table).encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"token {i} {s!r} is not byte-level encoded") from None
            assigned[i] = True
    else:
        for s, i in base.items():
            m = _BYTE_PIECE.fullmatch(s) if byte_fallback else None
            out[i] = bytes([int(m.group(1), 16)]) if m else s.replace(meta, " ").encode("utf-8")
            assigned[i] = True
    unk = getattr(tok.model, "unk_token", None)
    if unk is not None and unk in base:
        special.add(base[unk])
    for i, t in added.items():
        assigned[i] = True
        if t.special or (scheme == "sentencepiece" and base.get(t.content) == i and _TAG.fullmatch(t.content)):
            special.add(i)
        elif scheme == "sentencepiece" and t.normalized:
            out[i] = t.content.replace(meta, " ").encode("utf-8")
        else:
            out[i] = t.content.encode("utf-8")
    special.update(i for i in range(size) if not assigned[i])  # holes in the id space

    cfg_eos, declared = cfg.special_strings()
    for s in declared:
        i = tok.token_to_id(s)
        if i is not None:
            special.add(i)
    eos = cfg.model_eos_ids()
    if not eos and cfg_eos is not None and tok.token_to_id(cfg_eos) is not None:
        eos = (tok.token_to_id(cfg_eos),)
    if not eos and eos_id is not None:
        eos = (eos_id,)
    if not eos:
        for name in _FALLBACK_EOS:
            i = tok.token_to_id(name)
            if i is not None and i in special:
                eos = (i,)
                break
    return _Source(out, special, eos, scheme)


# ---------------------------------------------------------------------- SentencePiece tokenizer.model


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _proto_fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: varints as int, length-delimited as bytes."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
            yield field, val
        elif wire == 2:
            ln, i = _varint(buf, i)
            yield field, buf[i : i + ln]
            i += ln
        elif wire == 5:
            yield field, buf[i : i + 4]
            i += 4
        elif wire == 1:
            yield field, buf[i : i + 8]
            i += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _int32(v: int | bytes) -> int:
    assert isinstance(v, int)
    return v - (1 << 64) if v >= 1 << 63 else v


# sentencepiece_model.proto: SentencePiece.Type
_SP_NORMAL, _SP_UNKNOWN, _SP_CONTROL, _SP_USER_DEFINED, _SP_UNUSED, _SP_BYTE = 1, 2, 3, 4, 5, 6


def _from_sp_proto(data: bytes, cfg: _DirConfig) -> _Source:
    """From a serialised SentencePiece ``ModelProto`` (read directly; no sentencepiece/protobuf needed)."""
    pieces: list[tuple[str, int]] = []
    eos_id, escape_ws = 2, True
    for field, val in _proto_fields(data):
        if field == 1:  # pieces: piece=1, score=2, type=3
            piece, typ = "", _SP_NORMAL
            for f, v in _proto_fields(val):  # type: ignore[arg-type]
                if f == 1:
                    piece = v.decode("utf-8")  # type: ignore[union-attr]
                elif f == 3:
                    typ = int(v)  # type: ignore[arg-type]
            pieces.append((piece, typ))
        elif field == 2:  # trainer_spec: eos_id=42
            for f, v in _proto_fields(val):  # type: ignore[arg-type]
                if f == 42:
                    eos_id = _int32(v)
        elif field == 3:  # normalizer_spec: escape_whitespaces=5
            for f, v in _proto_fields(val):  # type: ignore[arg-type]
                if f == 5:
                    escape_ws = bool(v)
    out: list[bytes] = []
    special: set[int] = set()
    for i, (piece, typ) in enumerate(pieces):
        if typ in (_SP_NORMAL, _SP_USER_DEFINED):
            out.append((piece.replace("▁", " ") if escape_ws else piece).encode("utf-8"))
        elif typ == _SP_BYTE:
            m = _BYTE_PIECE.fullmatch(piece)
            if m is None:
                raise ValueError(f"bad byte piece {piece!r}")
            out.append(bytes([int(m.group(1), 16)]))
        else:  # UNKNOWN, CONTROL, UNUSED
            out.append(b"")
            special.add(i)
    index = {p: i for i, (p, _) in enumerate(pieces)}
    cfg_eos, declared = cfg.special_strings()
    special.update(index[s] for s in declared if s in index)
    eos = cfg.model_eos_ids()
    if not eos and cfg_eos in index:
        eos = (index[cfg_eos],)
    if not eos and 0 <= eos_id < len(pieces):
        eos = (eos_id,)
    return _Source(out, special, eos, "sentencepiece")
