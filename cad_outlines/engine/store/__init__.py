"""Stage 2, the lexer and the mask store: terminals and a vocabulary in, the flat arrays the runtime maps.

Enters: the front end's terminals and parse tables, and a vocabulary's token bytes.
Leaves: the lexer's configurations (:mod:`.lexer`, lark's basic-lexer rules byte by byte), the
mask store (:mod:`.mask_store`: token sets keyed by configuration and terminal sequence) built by the one
native builder (:mod:`.native_store`: the vocabulary walked through the byte automaton), grammar analysis
(:mod:`.grammar_analysis`: never-legal and always-legal continuations, interchangeable terminals) and the
store rewrite it proves safe (:mod:`.streamline`), and the whole grammar as flat arrays in one file
(:mod:`.flat_grammar`). Eager and lazy stores are built by the same native code
(``_native/src/lazy_store.cpp``): all rows at once, or a configuration's on first use.
May import: :mod:`..frontend`, the standard library, lark, numpy, ``cad_outlines.errors`` and the native
core. Nothing of the compiled handle (type hints only), the matcher, the reference or the model layer.
"""
