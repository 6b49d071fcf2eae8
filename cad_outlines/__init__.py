"""cad_outlines: fast grammar-constrained decoding, and Copy-as-Decode edits on top of it."""

from .edits import (
    Copy,
    EditProgram,
    Gen,
    IncompleteProgramError,
    ProgramSyntaxError,
    SpanError,
    StreamingResolver,
    extract_program,
    gen_ops,
    iter_resolve,
    number_lines,
    oracle_program,
    parse_program,
    resolve,
    resolve_text,
    split_lines,
    unnumber_lines,
)
from .edits.formats import EDIT_FORMATS, apply_format, get_format, oracle_text
from .engine.compile import compile_grammar, compile_json_schema
from .errors import (
    CadOutlinesError,
    GrammarError,
    InexpressibleEditError,
    MatchError,
    ProgramError,
    RequestError,
    ResourceLimitError,
    SchemaError,
    ServingError,
    TokenError,
)
from .engine.compiled_grammar import CompiledGrammar
from .engine.matcher import (
    InvalidTokenError,
    Matcher,
    allocate_token_bitmask,
    fill_next_token_bitmask_batch,
    unpack_bitmask,
)
from .engine.frontend.terminals import GrammarCompileError
from .engine.vocabulary import Vocabulary
from .grammars import grammar_path, load_grammar_text

from ._version import __version__

__all__ = [
    "EDIT_FORMATS",
    "InexpressibleEditError",
    "MatchError",
    "apply_format",
    "get_format",
    "oracle_text",
    "CadOutlinesError",
    "GrammarError",
    "ProgramError",
    "RequestError",
    "ResourceLimitError",
    "ServingError",
    "TokenError",
    "CompiledGrammar",
    "GrammarCompileError",
    "SchemaError",
    "InvalidTokenError",
    "Matcher",
    "Vocabulary",
    "compile_grammar",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "compile_json_schema",
    "fill_next_token_bitmask_batch",
    "unpack_bitmask",
    "Copy",
    "EditProgram",
    "Gen",
    "IncompleteProgramError",
    "ProgramSyntaxError",
    "SpanError",
    "StreamingResolver",
    "__version__",
    "gen_ops",
    "grammar_path",
    "iter_resolve",
    "load_grammar_text",
    "number_lines",
    "oracle_program",
    "parse_program",
    "resolve",
    "resolve_text",
    "split_lines",
    "unnumber_lines",
    "edit_tool",
    "extract_program",
]

_LAZY = {  # importing outlines takes seconds: load these on first use
    "CFGLogitsProcessor": "cad_outlines.generators.outlines_processor",
    "analyze_grammar": "cad_outlines.grammar_report",
    "GrammarReport": "cad_outlines.grammar_report",
    "cfg_generator": "cad_outlines.generators.outlines_processor",
    "outlines_generator": "cad_outlines.generators.outlines_processor",
    "output_type_processor": "cad_outlines.generators.outlines_processor",
    "apply_token_bitmask_inplace": "cad_outlines.decoding.logits",
    "edit_tool": "cad_outlines.generators.agent_tool",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cad_outlines' has no attribute {name!r}")
