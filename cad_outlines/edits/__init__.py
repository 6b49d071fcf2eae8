"""Edit programs: the copy/gen language, its resolver and oracle programs."""

from .answers import extract_program, program_from_answer, resolve_text
from .documents import deletes_everything, read_document, write_document
from .lines import number_lines, split_lines, unnumber_lines
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
    "deletes_everything",
    "extract_program",
    "gen_ops",
    "iter_resolve",
    "number_lines",
    "oracle_program",
    "parse_program",
    "program_from_answer",
    "read_document",
    "resolve",
    "resolve_text",
    "split_lines",
    "unnumber_lines",
    "write_document",
]
