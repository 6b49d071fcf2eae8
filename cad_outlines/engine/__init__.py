"""The grammar engine, stage by stage (each stage a package; arrows point down only):

1. :mod:`.frontend`: grammar text -> terminals (byte DFAs) and LALR parse tables; a Lark grammar
   (:mod:`.frontend.grammar_load`) or a JSON Schema (:mod:`.frontend.json_schema`).
2. :mod:`.store`: terminals x vocabulary -> lexer configurations, the mask store (streamlined) and the
   flat arrays of one cache file.
3. Here, the compiled handle and its runtime: :mod:`.compile` (the driver and its on-disk cache,
   :mod:`.compile_profile` its phase timings), :mod:`.compiled_grammar` (``CompiledGrammar``: a grammar
   compiled for one vocabulary, over the flat arrays), :mod:`.matcher` (the public matcher over the native
   core), :mod:`.vocabulary` and :mod:`.token_ids`; :func:`.compile.compile_json_schema` compiles a
   JSON Schema through the same driver.

:mod:`.reference` holds pure-Python references for tests and studies; no production module imports it.
"""
