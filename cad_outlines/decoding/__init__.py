"""Decoding: the parts of a decode step, and the Copy-as-Decode run's prompt and results, shared by the
in-process loops (:mod:`cad_outlines.generators`) and the vLLM client (:mod:`cad_outlines.serving`).

- :mod:`.kv` -- a transformers model and token ids in, logits out: forwards over a KV cache that grows
  in place (one forward per copy op or run of forced tokens) and crops back.
- :mod:`.logits` -- logits and a bool mask or packed bitmask in, masked logits out.
- :mod:`.encoding` -- text in, token ids out, byte-exactly as a decode loop continues a sequence.
- :mod:`.spans` -- a token mask and the program text so far in, the mask without tokens that would
  name a line outside the document.
- :mod:`.prompt` -- a document and an instruction in, the prompt ending with ``<program>`` out.
- :mod:`.results` -- what an edit run gives back: its events, result and costs.

It imports :mod:`cad_outlines.edits`, :mod:`cad_outlines.engine` and the base modules (errors) only;
torch and transformers are imported inside the functions that need them. Generators and serving import
it; nothing below them does.
"""
