"""Serving: our grammars and Copy-as-Decode edits on vLLM (see docs/serving.md).

- :mod:`.vllm_processor` -- :class:`CadLogitsProcessor`, the vLLM v1 logits processor
  (imports vLLM; the rest of this package does not).
- :mod:`.request` -- what a request carries (``extra_args`` / ``vllm_xargs``).
- :mod:`.grammar_library`, :mod:`.constraint_state` -- grammars per tokenizer, per-request
  state and the batch mask step.
- :mod:`.served_edit`, :mod:`.backends`, :mod:`.editor` -- the Copy-as-Decode client.
"""

from .editor import ServedEditor
from .request import ConstraintRequest, EditSegment, GrammarSpec, RequestError
from .served_edit import ServedEdit, ServedEditStats, ServingError

PROCESSOR = "cad_outlines.serving.vllm_processor:CadLogitsProcessor"

__all__ = ["PROCESSOR", "ConstraintRequest", "EditSegment", "GrammarSpec", "RequestError", "ServedEdit",
           "ServedEditStats", "ServedEditor", "ServingError"]
