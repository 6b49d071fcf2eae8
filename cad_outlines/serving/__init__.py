"""Serving: our grammars and Copy-as-Decode edits on vLLM (see docs/serving.md).

Three concerns, one sub-package each, arrows pointing one way (``http`` -> ``editing`` -> ``constraints``):

- :mod:`.constraints` -- constraints on requests: what a request carries, its admission against the
  server's limits, grammars compiled before admission by a worker process, the per-request state and
  the vLLM logits processor (:class:`CadLogitsProcessor`).
- :mod:`.editing` -- Copy-as-Decode edits on an engine: one edit as requests, many edits at once, the
  engines (``LLM``, HTTP, ``AsyncLLM``) and the entry point :class:`ServedEditor`.
- :mod:`.http` -- HTTP routes on vLLM's server: the admission middleware every request passes
  (:class:`GrammarAdmissionMiddleware`) and ``POST /v1/cad/edits`` (``python -m cad_outlines.serving``).

What they share: :mod:`.limits` (the server's limits, from the environment) and :mod:`.tokenizer` (the
vocabulary, once per process). The vLLM-facing classes are imported on first use, so importing this
package does not import vLLM:
``--logits-processors cad_outlines.serving:CadLogitsProcessor --middleware cad_outlines.serving.GrammarAdmissionMiddleware``.
"""

from .constraints.grammar_gate import GrammarGate
from .constraints.request import ConstraintRequest, EditSegment, GrammarSpec, RequestError
from .editing.async_backend import AsyncLLMBackend
from .editing.editor import ServedEditor
from .editing.served_edit import ServedEdit, ServedEditStats, ServingError
from .http import MIDDLEWARE, PROCESSOR

__all__ = ["MIDDLEWARE", "PROCESSOR", "AsyncLLMBackend", "CadLogitsProcessor", "ConstraintRequest", "EditEndpointPlugin",
           "EditSegment", "GrammarAdmissionMiddleware", "GrammarGate", "GrammarSpec", "RequestError", "ServedEdit",
           "ServedEditStats", "ServedEditor", "ServingError"]

_LAZY = {  # these import vLLM or starlette: on first use only
    "CadLogitsProcessor": "cad_outlines.serving.constraints.vllm_processor",
    "GrammarAdmissionMiddleware": "cad_outlines.serving.http.middleware",
    "EditEndpointPlugin": "cad_outlines.serving.http.edit_endpoint",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cad_outlines.serving' has no attribute {name!r}")
