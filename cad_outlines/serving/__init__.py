"""Serving: our grammars and Copy-as-Decode edits on vLLM (see docs/serving.md).

- :mod:`.vllm_processor` -- :class:`CadLogitsProcessor`, the vLLM v1 logits processor
  (imports vLLM; the rest of this package does not at import time).
- :mod:`.request` -- what a request carries (``extra_args`` / ``vllm_xargs``).
- :mod:`.grammar_library`, :mod:`.constraint_state` -- grammars per tokenizer, per-request
  state and the batch mask step; :mod:`.tokenizer` -- the vocabulary, once per process.
- :mod:`.grammar_gate`, :mod:`.compile_worker`, :mod:`.http_admission` -- grammars compiled
  before their requests are admitted (by a worker process under OS limits), so a new grammar
  does not stall the engine; the middleware is the one gate of every route.
- :mod:`.limits`, :mod:`.admission` -- the server's limits (env vars) and the checks of a
  request's ``cad_*`` arguments against them.
- :mod:`.served_edit`, :mod:`.edit_run`, :mod:`.backends`, :mod:`.async_backend`,
  :mod:`.editor` -- the Copy-as-Decode client: one edit as requests, many edits at once,
  the engines (``LLM``, HTTP, ``AsyncLLM``) and the entry point.
- :mod:`.session_channel` -- one engine request per edit (vLLM's streaming-input sessions)
  on ``AsyncLLM`` and ``LLM``.
- :mod:`.edit_endpoint`, :mod:`.api_server` -- ``POST /v1/cad/edits`` on vLLM's server
  (``python -m cad_outlines.serving.api_server``).
"""

from .async_backend import AsyncLLMBackend
from .editor import ServedEditor
from .grammar_gate import GrammarGate
from .request import ConstraintRequest, EditSegment, GrammarSpec, RequestError
from .served_edit import ServedEdit, ServedEditStats, ServingError

PROCESSOR = "cad_outlines.serving.vllm_processor:CadLogitsProcessor"
MIDDLEWARE = "cad_outlines.serving.http_admission.GrammarAdmissionMiddleware"

__all__ = ["MIDDLEWARE", "PROCESSOR", "AsyncLLMBackend", "ConstraintRequest", "EditSegment", "GrammarGate",
           "GrammarSpec", "RequestError", "ServedEdit", "ServedEditStats", "ServedEditor", "ServingError"]
