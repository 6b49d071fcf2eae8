"""HTTP routes on vLLM's OpenAI-compatible server.

- :mod:`.middleware` -- :class:`GrammarAdmissionMiddleware`, the one gate every request of every route
  passes (body size, ``cad_*`` arguments, grammars compiled before admission).
- :mod:`.edit_endpoint` -- ``POST /v1/cad/edits``: an edit run by the server on its own engine;
  :mod:`.api_server` -- vLLM's server with that endpoint attached (``python -m cad_outlines.serving``).
"""

# How vLLM's server names our classes (``--logits-processors``, ``--middleware``): the package facade's lazy names.
PROCESSOR = "cad_outlines.serving:CadLogitsProcessor"
MIDDLEWARE = "cad_outlines.serving.GrammarAdmissionMiddleware"
