"""Pure-Python references for the native runtime: used by tests and the equivalence studies only.

Holds the matcher over the Python objects (:mod:`.matcher`), the incremental LALR parser
(:mod:`.parser`), the scalar lexer run (:mod:`.lexer_run`), a configuration's rows as a trie
(:mod:`.row_trie`) and the Python mask-store builder (:mod:`.store_builder`), the oracle of the native
one. Decoding never runs them, and no production module imports this package.
May import: anything in :mod:`cad_outlines.engine`.
"""
