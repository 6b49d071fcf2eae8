"""Constraints on requests: what a request asks for, its admission, its grammar compiled before the engine
sees it, and the per-request state the logits processor masks with.

- :mod:`.request` -- what a request carries (``extra_args`` / ``vllm_xargs``);
  :mod:`.admission` -- its checks against the server's limits;
  :mod:`.request_fields` -- the fields users already send (``response_format``, ``structured_outputs``)
  as that constraint, for the middleware and the processor.
- :mod:`.grammar_library` -- grammars per tokenizer, compiled once per process;
  :mod:`.grammar_gate`, :mod:`.compile_worker` -- a new grammar compiled by a worker process under OS
  limits before its request is admitted, so it does not stall the engine.
- :mod:`.constraint_state` -- per-request state and the batch mask step (no vLLM);
  :mod:`.vllm_processor` -- :class:`CadLogitsProcessor`, the vLLM v1 logits processor (imports vLLM).

Imports nothing from :mod:`..editing` or :mod:`..http`.
"""
