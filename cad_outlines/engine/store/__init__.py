"""Stage 2, the lexer and the mask store: terminals and a vocabulary in, the flat arrays the runtime maps.

Enters: the front end's terminals and parse tables, and a vocabulary's token bytes.
Leaves: the lexer's configurations (:mod:`.lexer`, lark's basic-lexer rules byte by byte), the
token-level index over them (:mod:`.lexer_index`: the vocabulary walked through the byte automaton), the
mask store (:mod:`.mask_store`: token sets keyed by configuration and terminal sequence), grammar analysis
(:mod:`.grammar_analysis`: never-legal and always-legal continuations, interchangeable terminals) and the
store rewrite it proves safe (:mod:`.streamline`), and the whole grammar as flat arrays in one file
(:mod:`.flat_grammar`). The lazy store is the native core's (``_native/src/lazy_store.cpp``).
May import: :mod:`..frontend`, the standard library, lark, numpy, ``cad_outlines.errors`` and the native
core. Nothing of the compiled handle (type hints only), the matcher, the reference or the model layer.
"""
