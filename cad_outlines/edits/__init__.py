"""Edit programs: the copy/gen language, its resolver and oracle programs."""

from .lines import number_lines, split_lines
from .oracle import approx_token_count, oracle_program
from .program import Copy, EditProgram, Gen, ProgramScanner, ProgramSyntaxError, gen_ops, parse_program
from .resolve import IncompleteProgramError, SpanError, StreamingResolver, iter_resolve, resolve

__all__ = [
    "Copy",
    "EditProgram",
    "Gen",
    "IncompleteProgramError",
    "ProgramScanner",
    "ProgramSyntaxError",
    "SpanError",
    "StreamingResolver",
    "approx_token_count",
    "gen_ops",
    "iter_resolve",
    "number_lines",
    "oracle_program",
    "parse_program",
    "resolve",
    "split_lines",
]
