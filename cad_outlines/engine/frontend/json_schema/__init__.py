"""JSON Schema front end: a schema -> rules and terminals for this engine (beside the Lark reader).

:mod:`.schema` normalizes a schema (``$ref``, ``allOf`` merged, ``anyOf``/``oneOf`` as alternatives,
refusals with the keyword and its JSON pointer), :mod:`.strings`, :mod:`.numbers` and :mod:`.formats`
build the automata of string and number constraints, :mod:`.lexicon` makes the terminals exact under
the basic lexer, :mod:`.grammar` writes the rules. The compile driver is
:func:`cad_outlines.engine.compile.compile_json_schema`.
"""

from .grammar import PROPERTY_ORDERS, WHITESPACE, SchemaGrammar, SchemaOrderWarning, build_grammar
from .schema import ANNOTATIONS

__all__ = ["SchemaGrammar", "build_grammar", "WHITESPACE", "PROPERTY_ORDERS", "SchemaOrderWarning", "ANNOTATIONS"]
