"""cad_outlines: fast grammar-constrained decoding, and Copy-as-Decode edits on top of it."""

from .edits import (
    Copy,
    EditProgram,
    Gen,
    IncompleteProgramError,
    ProgramSyntaxError,
    SpanError,
    StreamingResolver,
    gen_ops,
    iter_resolve,
    number_lines,
    oracle_program,
    parse_program,
    resolve,
    split_lines,
)
from .grammars import grammar_path, load_grammar_text

__version__ = "0.1.0"

__all__ = [
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
    "split_lines",
]
