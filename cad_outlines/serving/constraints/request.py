"""What a request carries to turn our constraint on: flat ``extra_args`` keys.

vLLM hands ``SamplingParams.extra_args`` to logits processors; over HTTP the same dict
is the request's ``vllm_xargs``, whose values may only be str, int, float or lists of
them -- hence flat keys, ints for booleans. Every key starts with ``cad_``:

- ``cad_grammar``: a shipped grammar by name (``copy_edit``, ``json``, ``python``), or
- ``cad_grammar_text``: the grammar's Lark text; ``cad_start``: its start symbol, or
- ``cad_json_schema``: a JSON Schema's JSON text (compiled by :func:`~cad_outlines.compile_json_schema`).
  OpenAI's ``response_format`` and vLLM's ``structured_outputs`` are translated into these keys
  (:mod:`.request_fields`).
- Copy-as-Decode segments (``copy_edit`` only): ``cad_n_lines`` (the document's line
  count: copy spans stay within 1..n), ``cad_monotonic`` (0/1), ``cad_program_ids`` (the
  program tokens already in the prompt), ``cad_session`` (an id for the edit, so the
  processor can resume its state instead of replaying ``cad_program_ids``) and
  ``cad_stop_at_copy`` (0/1, default 1: end the request with EOS when a copy op closes),
  ``cad_stop_at_forced`` (an int k, default 0 = off: end the request with EOS when the
  grammar forces a run of k or more tokens, which the client appends to the next prompt).
- Edits in another format (``cad_format``: ``search_replace``, ``udiff``, ``apply_patch``,
  ``str_replace``; default ``copy``): ``cad_grammar`` is the format's grammar, and
  ``cad_document`` is the document (the text the search text must come from: the document
  constraint of :mod:`cad_outlines.decoding.document_constraint`); ``cad_n_lines``,
  ``cad_program_ids``, ``cad_session`` and ``cad_stop_at_forced`` as for a copy segment
  (``cad_stop_at_copy`` and ``cad_monotonic`` do not apply).
- ``cad_script_ids``: teacher forcing; at output step k only the k-th of these tokens
  (counting ``cad_program_ids`` first) is allowed -- for benchmarks.
- ``cad_tag``: a label for log lines about this request.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from ...edits.formats import EDIT_FORMATS, get_format
from ...engine.frontend.json_schema import PROPERTY_ORDERS
from ...errors import RequestError

__all__ = ["ConstraintRequest", "EditSegment", "GrammarSpec", "RequestError"]

PREFIX = "cad_"
_WHITESPACE_NOT_LARK = "cad_whitespace belongs to cad_json_schema (a Lark grammar spells its own whitespace)"
_ORDER_NOT_LARK = "cad_property_order belongs to cad_json_schema (a Lark grammar has no properties)"
_KEYS = {
    "cad_grammar", "cad_grammar_text", "cad_json_schema", "cad_start", "cad_n_lines", "cad_monotonic",
    "cad_program_ids", "cad_session", "cad_stop_at_copy", "cad_stop_at_forced", "cad_script_ids", "cad_tag",
    "cad_format", "cad_document", "cad_whitespace", "cad_property_order",
}


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar by shipped name, by Lark text, or a JSON Schema by its JSON text (exactly one of them)."""

    name: str | None = None
    text: str | None = None
    start: str | None = None
    schema: str | None = None
    whitespace: str | None = None  # a JSON Schema's: "outlines" (None), "flexible", "compact" or a regex
    property_order: str | None = None  # a JSON Schema's: "declared" (None) or "any"

    def __post_init__(self):
        if self.whitespace is not None and self.schema is None:
            raise RequestError(_WHITESPACE_NOT_LARK)
        if self.property_order is not None:
            if self.schema is None:
                raise RequestError(_ORDER_NOT_LARK)
            if self.property_order not in PROPERTY_ORDERS:
                raise RequestError(f"cad_property_order must be one of {list(PROPERTY_ORDERS)}, not "
                                   f"{_short(self.property_order)}")

    def schema_options(self) -> dict:
        """`compile_json_schema`'s options this spec sets (none: the front end's defaults)."""
        out = {} if self.whitespace is None else {"whitespace": self.whitespace}
        if self.property_order is not None:
            out["property_order"] = self.property_order
        return out

    @property
    def key(self) -> str:
        """Content key for caches: the name or a hash of the text or schema, and the start symbol."""
        if self.name is not None:
            what = f"name:{self.name}"
        else:
            kind, text = ("schema", self.schema) if self.schema is not None else ("text", self.text)
            what = f"{kind}:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        ws = ("" if self.whitespace is None else
              "|ws:" + hashlib.sha256(self.whitespace.encode("utf-8", "surrogatepass")).hexdigest())
        order = "" if self.property_order in (None, "declared") else f"|order:{self.property_order}"
        return f"{what}|start:{self.start or ''}{ws}{order}"

    @property
    def label(self) -> str:
        """The grammar in a log line: its name, or what it is and the start of its hash."""
        if self.name is not None:
            return self.name
        kind, digest = self.key.split("|", 1)[0].split(":", 1)
        return f"(JSON Schema, {digest[:12]})" if kind == "schema" else f"(by text, {digest[:12]})"


@dataclass(frozen=True)
class EditSegment:
    """One Copy-as-Decode request: the edit's state when this request starts."""

    n_lines: int
    monotonic: bool = False
    program_ids: tuple[int, ...] = ()
    session: str | None = None
    stop_at_copy: bool = True
    stop_at_forced: int = 0  # end at a grammar-forced run of this many tokens or more (0: never)
    format: str = "copy"  # the edit format (cad_outlines.edits.formats)
    document: str | None = None  # the document, for the diff-style formats' document constraint


@dataclass(frozen=True)
class ConstraintRequest:
    """Everything a request asks of the logits processor."""

    grammar: GrammarSpec | None = None
    edit: EditSegment | None = None
    script_ids: tuple[int, ...] | None = None
    tag: str | None = None

    def to_extra_args(self) -> dict:
        """The flat ``extra_args`` / ``vllm_xargs`` dict."""
        out: dict = {}
        if self.grammar is not None:
            if self.grammar.name is not None:
                out["cad_grammar"] = self.grammar.name
            elif self.grammar.schema is not None:
                out["cad_json_schema"] = self.grammar.schema
                if self.grammar.whitespace is not None:
                    out["cad_whitespace"] = self.grammar.whitespace
                if self.grammar.property_order is not None:
                    out["cad_property_order"] = self.grammar.property_order
            else:
                out["cad_grammar_text"] = self.grammar.text
            if self.grammar.start:
                out["cad_start"] = self.grammar.start
        if self.edit is not None:
            out["cad_n_lines"] = self.edit.n_lines
            out["cad_monotonic"] = int(self.edit.monotonic)
            out["cad_program_ids"] = list(self.edit.program_ids)
            out["cad_stop_at_copy"] = int(self.edit.stop_at_copy)
            if self.edit.stop_at_forced:
                out["cad_stop_at_forced"] = self.edit.stop_at_forced
            if self.edit.session:
                out["cad_session"] = self.edit.session
            if self.edit.format != "copy":
                out["cad_format"] = self.edit.format
                out["cad_document"] = self.edit.document
        if self.script_ids is not None:
            out["cad_script_ids"] = list(self.script_ids)
        if self.tag:
            out["cad_tag"] = self.tag
        return out

    @classmethod
    def from_extra_args(cls, extra: dict | None) -> ConstraintRequest | None:
        """The request's constraint, or None when it has no ``cad_*`` key. Raises
        :class:`RequestError` naming the bad key."""
        if not extra:
            return None
        if not isinstance(extra, dict):
            raise RequestError(f"extra_args must be a dict, not {type(extra).__name__}")
        mine = {k: v for k, v in extra.items() if isinstance(k, str) and k.startswith(PREFIX)}
        if not mine:
            return None
        unknown = sorted(set(mine) - _KEYS)
        if unknown:
            shown = [_short(k) for k in unknown[:5]] + (["..."] if len(unknown) > 5 else [])
            raise RequestError(f"unknown cad_outlines argument(s) [{', '.join(shown)}]; known: {sorted(_KEYS)}")
        name, text, schema = mine.get("cad_grammar"), mine.get("cad_grammar_text"), mine.get("cad_json_schema")
        if sum(v is not None for v in (name, text, schema)) > 1:
            raise RequestError("give cad_grammar (a shipped name), cad_grammar_text or cad_json_schema, not both")
        for key in ("cad_grammar", "cad_grammar_text", "cad_json_schema", "cad_start", "cad_session", "cad_tag",
                    "cad_format", "cad_document", "cad_whitespace", "cad_property_order"):
            if key in mine and not isinstance(mine[key], str):
                raise RequestError(f"{key} must be a string, not {type(mine[key]).__name__}")
        for key in ("cad_monotonic", "cad_stop_at_copy"):
            if key in mine and _int(mine, key) not in (0, 1):
                raise RequestError(f"{key} must be 0 or 1, not {_short(mine[key])}")
        grammar = None
        if schema is not None:
            if "cad_start" in mine:
                raise RequestError("cad_start belongs to a Lark grammar, not to cad_json_schema")
            grammar = GrammarSpec(schema=schema, whitespace=mine.get("cad_whitespace"),
                                  property_order=mine.get("cad_property_order"))
        elif "cad_whitespace" in mine:
            raise RequestError(_WHITESPACE_NOT_LARK)
        elif "cad_property_order" in mine:
            raise RequestError(_ORDER_NOT_LARK)
        elif name is not None or text is not None:
            grammar = GrammarSpec(name=name, text=text, start=mine.get("cad_start"))
        elif "cad_start" in mine:
            raise RequestError("cad_start without cad_grammar or cad_grammar_text")
        edit = None
        if "cad_n_lines" in mine:
            n = _int(mine, "cad_n_lines")
            if n < 0:
                raise RequestError(f"cad_n_lines must be >= 0, not {n}")
            fmt = mine.get("cad_format", "copy")
            if fmt not in EDIT_FORMATS:
                raise RequestError(f"unknown cad_format {_short(fmt)}: use one of {', '.join(EDIT_FORMATS)}")
            want = get_format(fmt).grammar
            if grammar is None or grammar.name != want:
                raise RequestError(f"cad_n_lines (an edit segment in format {fmt!r}) needs cad_grammar={want!r}")
            document = mine.get("cad_document")
            if fmt == "copy" and document is not None:
                raise RequestError("cad_document belongs to an edit in another format than copy (give cad_format)")
            if fmt != "copy" and document is None:
                raise RequestError(f"an edit segment in format {fmt!r} needs cad_document (the document's text)")
            forced = _int(mine, "cad_stop_at_forced", 0)
            if forced < 0:
                raise RequestError(f"cad_stop_at_forced must be >= 0, not {forced}")
            edit = EditSegment(n_lines=n, monotonic=bool(_int(mine, "cad_monotonic", 0)),
                               program_ids=_ids(mine, "cad_program_ids"), session=mine.get("cad_session"),
                               stop_at_copy=bool(_int(mine, "cad_stop_at_copy", 1)), stop_at_forced=forced,
                               format=fmt, document=document)
        else:
            for key in ("cad_monotonic", "cad_program_ids", "cad_session", "cad_stop_at_copy", "cad_stop_at_forced",
                        "cad_format", "cad_document"):
                if key in mine:
                    raise RequestError(f"{key} belongs to an edit segment: give cad_n_lines too")
        script = _ids(mine, "cad_script_ids") if "cad_script_ids" in mine else None
        if grammar is None and script is None:
            raise RequestError("a cad_outlines request needs cad_grammar, cad_grammar_text, cad_json_schema or "
                               "cad_script_ids")
        return cls(grammar=grammar, edit=edit, script_ids=script, tag=mine.get("cad_tag"))


def _int(args: dict, key: str, default: int | None = None) -> int:
    """An integer argument (a float with an integral value, e.g. 3.0, counts; inf and nan do not)."""
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not (math.isfinite(value) and value.is_integer())):
        raise RequestError(f"{key} must be an integer, not {_short(value)}")
    return int(value)


def _ids(args: dict, key: str) -> tuple[int, ...]:
    value = args.get(key, [])
    if not isinstance(value, (list, tuple)):
        raise RequestError(f"{key} must be a list of token ids (ints >= 0), not {type(value).__name__}")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise RequestError(f"{key} must be a list of token ids (ints >= 0); item {i} is {_short(v)}")
    return tuple(value)


def _short(value) -> str:
    """A value for an error message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
