"""The request fields users already send, as our constraint: OpenAI's ``response_format`` and vLLM's
``structured_outputs``, translated into a :class:`~.request.GrammarSpec` in ONE place.

Two callers, one translation (:func:`constraint_of_fields`):

- the HTTP middleware (:func:`rewrite_body`) rewrites the JSON body of a chat or completion request
  (``/v1/chat/completions``, ``/v1/completions``, ``/invocations``): the fields are taken out and their
  constraint goes into ``vllm_xargs`` (``cad_json_schema`` and ``cad_whitespace``, or ``cad_grammar_text``), so
  vLLM never sees them: its own structured-output backend neither validates them nor runs;
- the logits processor's ``validate_params`` (:func:`take_structured_outputs`) does the same to a
  ``SamplingParams`` whose ``structured_outputs`` is set (an in-process ``LLM`` or ``AsyncLLM``, or a route
  the middleware does not rewrite): the constraint moves into ``extra_args`` and ``structured_outputs``
  becomes None before vLLM copies the parameters for its engine.

What each field becomes (anything else is refused with a :class:`RequestError` naming the field: HTTP
400, never unconstrained output):

- ``response_format: {"type": "json_schema", "json_schema": {"schema": S}}``, ``structured_outputs.json: S``
  (an object, or its JSON text) -> the JSON Schema S;
- ``response_format: {"type": "json_object"}``, ``structured_outputs.json_object: true`` -> the JSON Schema
  ``{"type": "object"}``; ``response_format: {"type": "text"}`` -> no constraint;
- ``structured_outputs.regex: R`` -> one terminal /R/ covering the whole output;
- ``structured_outputs.choice: [c1, c2, ...]`` -> one terminal, exactly one of the strings;
- ``structured_outputs.grammar: G`` -> G as a Lark grammar (a one-rule GBNF choice ``root ::= "a" | "b"``
  as that choice: vLLM rewrites a choice so before a logits processor sees it);
- ``structured_outputs.disable_additional_properties: true`` -> the JSON Schema with objects closed, as vLLM's
  guidance backend does it (:func:`closed_objects`); with a regex, choice or grammar it changes nothing;
- ``structured_outputs.disable_any_whitespace: true`` -> the JSON Schema's whitespace ``"compact"`` (none);
  ``structured_outputs.whitespace_pattern: W`` (``guided_whitespace_pattern``) -> the regex W at each place JSON
  allows whitespace; both at once are refused; with a regex, choice or grammar they change nothing;
- vLLM's removed ``guided_json``, ``guided_regex``, ``guided_choice``, ``guided_grammar`` (which vLLM 0.32
  ignores, decoding unconstrained) -> as ``structured_outputs``' fields of the same names.

JSON Schemas are compiled by :func:`~cad_outlines.compile_json_schema`, grammars by the Lark path, both in
a compile worker behind the :class:`~.grammar_gate.GrammarGate`. Sizes are checked here, against the
server's limits, naming the field: a schema's bytes (``max_schema_bytes``) and nesting
(``max_schema_depth``), a grammar's bytes (``max_grammar_text_bytes``).
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass

from ...grammars import regex_grammar
from ..limits import ServerLimits, server_limits
from .admission import AdmissionError, check_schema_text, check_schema_value, text_bytes
from .request import ConstraintRequest, GrammarSpec, RequestError

__all__ = ["FieldConstraint", "JSON_OBJECT_SCHEMA", "REWRITTEN_PATHS", "canonical_schema", "choice_grammar",
           "closed_objects", "constraint_of_fields", "gbnf_choices", "regex_request_grammar", "rewrite_body",
           "take_structured_outputs"]

JSON_OBJECT_SCHEMA = {"type": "object"}  # json_object: any JSON object (as vLLM's llguidance backend reads it)
REWRITTEN_PATHS = ("/v1/chat/completions", "/v1/completions", "/invocations")  # their bodies carry vllm_xargs
_GRAMMAR_KEYS = ("cad_grammar", "cad_grammar_text", "cad_json_schema")
_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")  # vLLM's constraint kinds
_OPTIONS = ("disable_any_whitespace", "disable_additional_properties", "whitespace_pattern")  # besides the kinds
# where vLLM's guidance backend looks for object sub-schemas to close (backend_guidance.py, vLLM 0.32)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SUBSCHEMAS = ("additionalProperties", "unevaluatedProperties", "propertyNames", "contains", "additionalItems",
               "unevaluatedItems", "not", "if", "then", "else", "contentSchema", "items", "prefixItems", "allOf",
               "anyOf", "oneOf")
_GUIDED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "guided_whitespace_pattern")


@dataclass(frozen=True)
class FieldConstraint:
    """The constraint a request field asks for, and the field (for messages: ``response_format.json_schema``)."""

    spec: GrammarSpec
    field: str

    def refusal(self, error: Exception) -> RequestError:
        """`error` (the grammar or schema did not compile) as a 400 that names the field."""
        return RequestError(f"{self.field}: {error}")


def canonical_schema(schema: dict) -> str:
    """A schema's JSON text, compact and in the order given (property order is part of what a schema
    asks for: outputs follow it)."""
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def closed_objects(schema: dict) -> dict:
    """`schema` with ``"additionalProperties": false`` on every sub-schema that has ``properties`` or
    ``patternProperties`` and no ``additionalProperties`` of its own: vLLM's ``disable_additional_properties``,
    walking the sub-schemas vLLM's guidance backend walks. A new schema; `schema` is left as it is."""

    def walk(node):
        if isinstance(node, list):
            return [walk(x) if isinstance(x, dict) else x for x in node]
        out = dict(node)
        for key in _SCHEMA_MAPS:
            if isinstance(out.get(key), dict):
                out[key] = {k: walk(v) if isinstance(v, dict) else v for k, v in out[key].items()}
        for key in _SUBSCHEMAS:
            if isinstance(out.get(key), (dict, list)):
                out[key] = walk(out[key])
        if "additionalProperties" not in out and (isinstance(out.get("properties"), dict)
                                                  or isinstance(out.get("patternProperties"), dict)):
            out["additionalProperties"] = False
        return out

    return walk(schema)


def regex_request_grammar(regex: str) -> str:
    """A Lark grammar of one terminal, `regex`, covering the whole output (vLLM's ``regex``). An anchor at
    the very start (``^``, ``\\A``) or end (``$``, ``\\Z``) is dropped: the match is of the whole output
    anyway. The terminal matches as Python's ``re.match`` does (our lexer's rule), so every output is a
    full match of `regex`; an alternation whose earlier branch is a prefix of a later one's match
    (``a|ab``) only ever gives the earlier one (write ``ab|a``)."""
    body = regex[1:] if regex.startswith("^") else regex[2:] if regex.startswith("\\A") else regex
    for anchor in ("$", "\\Z"):
        if body.endswith(anchor):
            head = body[: -len(anchor)]
            escapes = len(head) - len(head.rstrip("\\"))  # an odd count escapes the anchor's first character
            if anchor == "\\Z" or escapes % 2 == 0:
                body = head
                break
    return regex_grammar(body, terminal="REGEX")


def choice_grammar(choices: list[str]) -> str:
    """A Lark grammar whose language is exactly `choices` (one terminal: the escaped alternatives; an empty
    string among them makes it optional)."""
    words = [c for c in dict.fromkeys(choices) if c]
    if not words:
        raise RequestError("structured_outputs.choice: every choice is the empty string")
    # longest first: a terminal matches as Python's re.match does, alternatives in order ("a|ab" never gives "ab")
    grammar = regex_grammar("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), terminal="CHOICE")
    return grammar.replace("start: CHOICE\n", "start: CHOICE?\n", 1) if "" in choices else grammar


_GBNF_CHOICE = re.compile(r'root ::= "(?:[^"\\]|\\.)*"(?: \| "(?:[^"\\]|\\.)*")*')
_GBNF_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_GBNF_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")


def gbnf_choices(grammar: str) -> list[str] | None:
    """The strings of a one-rule GBNF grammar of string alternatives (``root ::= "a" | "b"``, as vLLM's
    ``choice_as_grammar`` writes a choice before any logits processor sees it); None for any other text."""
    if not _GBNF_CHOICE.fullmatch(grammar):
        return None
    simple = {"n": "\n", "r": "\r", "t": "\t"}

    def unescape(m: re.Match) -> str:
        e = m.group(1)
        return chr(int(e[1:], 16)) if e[0] == "u" and len(e) == 5 else simple.get(e, e)

    return [_GBNF_ESCAPE.sub(unescape, m.group(1)) for m in _GBNF_STRING.finditer(grammar)]


def _get(obj, name: str):
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _schema_spec(value, field: str, limits: ServerLimits, closed: bool = False,
                 whitespace: str | None = None) -> FieldConstraint:
    """A JSON Schema field's constraint; `closed`: with :func:`closed_objects` applied; `whitespace`: the
    front end's whitespace (None: its default, an optional space around punctuation)."""
    if isinstance(value, str):
        schema = check_schema_text(value, field, limits)
    elif isinstance(value, dict):
        check_schema_value(value, field, limits)
        schema = value
    else:
        raise RequestError(f"{field} must be a JSON Schema (an object, or its JSON text), not {type(value).__name__}")
    if closed:
        schema = closed_objects(schema)
    text = canonical_schema(schema)
    size = text_bytes(text, limits.max_schema_bytes)
    if size > limits.max_schema_bytes:
        raise AdmissionError(field, "max_schema_bytes", size, limits.max_schema_bytes)
    return FieldConstraint(GrammarSpec(schema=text, whitespace=whitespace), field)


def _grammar_spec(text: str, field: str, limits: ServerLimits) -> FieldConstraint:
    size = text_bytes(text, limits.max_grammar_text_bytes)
    if size > limits.max_grammar_text_bytes:
        raise AdmissionError(field, "max_grammar_text_bytes", size, limits.max_grammar_text_bytes)
    return FieldConstraint(GrammarSpec(text=text), field)


def _string(value, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise RequestError(f"{field} must be a non-empty string, not {_shown(value)}")
    return value


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _of_response_format(fmt, limits: ServerLimits) -> FieldConstraint | None:
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return _schema_spec(JSON_OBJECT_SCHEMA, "response_format (json_object)", limits)
    if kind == "json_schema":
        inner = fmt.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, dict) else None
        if schema is None:
            raise RequestError("response_format.json_schema.schema is missing: a json_schema response format "
                               "needs the schema")
        return _schema_spec(schema, "response_format.json_schema.schema", limits)
    if kind == "structural_tag":
        raise RequestError("response_format type 'structural_tag' is not supported by cad_outlines (json_schema, "
                           "json_object and text are)")
    raise RequestError(f"response_format.type must be 'json_schema', 'json_object' or 'text', not {_shown(kind)}")


def _of_structured_outputs(so, limits: ServerLimits, prefix: str = "structured_outputs.") -> FieldConstraint | None:
    """`so`'s constraint; `prefix` names its fields in messages (``guided_`` for vLLM's removed fields)."""
    if isinstance(so, dict):
        unknown = sorted(k for k in so if k not in _KINDS and k not in _OPTIONS)
        if unknown:
            raise RequestError(f"structured_outputs.{unknown[0][:60]} is not a structured_outputs field (fields: "
                               f"{', '.join(_KINDS + _OPTIONS)})")
    elif not hasattr(so, "json_object"):  # vLLM's StructuredOutputsParams has every field
        raise RequestError(f"structured_outputs must be an object, not {type(so).__name__}")
    for option in ("disable_any_whitespace", "disable_additional_properties"):
        value = _get(so, option)
        if value is not None and not isinstance(value, bool):
            raise RequestError(f"{prefix}{option} must be true or false, not {_shown(value)}")
    closed = _get(so, "disable_additional_properties") is True
    whitespace = _whitespace_option(so, prefix, limits)
    given = [f"{prefix}{k}" for k in _KINDS if _get(so, k) is not None]
    if len(given) > 1:
        raise RequestError(f"give one constraint, not {' and '.join(given)}")
    if not given:
        return None
    field = given[0]
    kind = field[len(prefix):]
    value = _get(so, kind)
    if kind == "json":
        return _schema_spec(value, field, limits, closed, whitespace)
    if kind == "json_object":
        if value is not True:
            raise RequestError(f"{field} must be true if given, not {_shown(value)}")
        return _schema_spec(JSON_OBJECT_SCHEMA, field, limits, whitespace=whitespace)
    if kind == "regex":
        return _grammar_spec(regex_request_grammar(_string(value, field)), field, limits)
    if kind == "choice":
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(c, str) for c in value):
            raise RequestError(f"{field} must be a non-empty list of strings, not {_shown(value)}")
        return _grammar_spec(choice_grammar(list(value)), field, limits)
    if kind == "grammar":
        choices = gbnf_choices(_string(value, field))
        return _grammar_spec(value if choices is None else choice_grammar(choices), field, limits)
    raise RequestError(f"{field} is not supported by cad_outlines (json, regex, choice, grammar as Lark, and "
                       "json_object are)")


def _whitespace_option(so, prefix: str, limits: ServerLimits) -> str | None:
    """The JSON Schema front end's whitespace that `so` asks for: ``"compact"`` for
    ``disable_any_whitespace: true`` (no whitespace at all, as vLLM's xgrammar and guidance backends
    write it), the regex ``whitespace_pattern`` (as Outlines reads it: the whitespace at every place JSON
    allows some), None for neither (the default). Both at once is a 400."""
    compact = _get(so, "disable_any_whitespace") is True
    pattern = _get(so, "whitespace_pattern")
    if pattern is None:
        return "compact" if compact else None
    field = f"{prefix}whitespace_pattern"
    if not isinstance(pattern, str):
        raise RequestError(f"{field} must be a string (a regex), not {_shown(pattern)}")
    if compact:
        raise RequestError(f"give {prefix}disable_any_whitespace or {field}, not both")
    if len(pattern) > limits.max_string_chars:
        raise AdmissionError(field, "max_string_chars", len(pattern), limits.max_string_chars)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise RequestError(f"{field} is not a valid regex: {e}") from None
    return f"(?:{pattern})"  # a regex, never one of the front end's mode names ("compact"...)


def constraint_of_fields(response_format=None, structured_outputs=None, *, guided: dict | None = None,
                         limits: ServerLimits | None = None) -> FieldConstraint | None:
    """The constraint `response_format` (a JSON body's object), `structured_outputs` (a JSON body's object,
    or vLLM's ``StructuredOutputsParams``) and `guided` (vLLM's removed ``guided_json``, ``guided_regex``,
    ``guided_choice``, ``guided_grammar``, ``guided_whitespace_pattern`` without their prefix: vLLM 0.32
    ignores them and decodes unconstrained) ask for, None when they ask for none. Raises
    :class:`RequestError` (HTTP 400) naming the field for anything that cannot be honoured, or that is
    over the server's limits."""
    limits = limits or server_limits()
    if response_format is not None and not isinstance(response_format, dict):
        raise RequestError(f"response_format must be an object, not {type(response_format).__name__}")
    found = [c for c in (_of_response_format(response_format, limits) if response_format is not None else None,
                         _of_structured_outputs(structured_outputs, limits) if structured_outputs is not None else None,
                         _of_structured_outputs(guided, limits, "guided_") if guided else None) if c is not None]
    if len(found) > 1:
        raise RequestError(f"give {found[0].field} or {found[1].field}, not both: one constraint per request")
    return found[0] if found else None


def _merged_args(extra, constraint: FieldConstraint, carrier: str) -> dict:
    """`extra` (the request's own ``vllm_xargs`` / ``extra_args``) with the constraint's keys added."""
    if extra is not None and not isinstance(extra, dict):
        raise RequestError(f"{carrier} must be an object where {constraint.field} is given, not "
                           f"{type(extra).__name__}")
    extra = dict(extra or {})
    clash = [k for k in _GRAMMAR_KEYS if k in extra]
    if clash:
        raise RequestError(f"give {constraint.field} or {carrier}.{clash[0]}, not both: one constraint per request")
    extra.update(ConstraintRequest(grammar=constraint.spec).to_extra_args())
    return extra


def rewrite_body(body: dict, *, limits: ServerLimits | None = None) -> FieldConstraint | None:
    """Rewrite a chat or completion request's JSON body in place: its ``response_format`` /
    ``structured_outputs`` are taken out, their constraint goes into ``vllm_xargs``. The constraint
    (None: the body asks for none and is left as it is). Raises :class:`RequestError` naming the field."""
    guided = {k[len("guided_"):]: body[k] for k in _GUIDED if k in body}
    constraint = constraint_of_fields(body.get("response_format"), body.get("structured_outputs"), guided=guided,
                                      limits=limits)
    if constraint is None:
        return None
    body["vllm_xargs"] = _merged_args(body.get("vllm_xargs"), constraint, "vllm_xargs")
    for key in ("response_format", "structured_outputs", "guided_decoding_backend", *_GUIDED):
        body.pop(key, None)
    return constraint


def take_structured_outputs(params, *, limits: ServerLimits | None = None) -> FieldConstraint | None:
    """Move a ``SamplingParams``' ``structured_outputs`` into its ``extra_args`` (vLLM's own backend then
    never runs for it: ``structured_outputs`` is None). The constraint, or None when it has none. Raises
    :class:`RequestError` naming the field."""
    so = getattr(params, "structured_outputs", None)
    if so is None:
        return None
    constraint = constraint_of_fields(structured_outputs=so, limits=limits)
    if constraint is None:
        return None
    params.extra_args = _merged_args(getattr(params, "extra_args", None), constraint, "extra_args")
    params.structured_outputs = None
    return constraint
