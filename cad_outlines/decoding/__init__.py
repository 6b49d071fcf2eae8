"""Decoding: the parts of a decode step, and the Copy-as-Decode run's prompt and results, shared by the
in-process loops (:mod:`cad_outlines.generators`) and the vLLM client (:mod:`cad_outlines.serving`).

- :mod:`.kv` -- a transformers model and token ids in, logits out: forwards over a KV cache that grows
  in place (one forward per copy op or run of forced tokens) and crops back.
- :mod:`.logits` -- logits and a bool mask or packed bitmask in, masked logits out.
- :mod:`.encoding` -- text in, token ids out, byte-exactly as a decode loop continues a sequence.
- :mod:`.spans` -- a token mask and the program text so far in, the mask without tokens that would
  name a line outside the document.
- :mod:`.prompt` -- a document, an instruction and an edit format in, the prompt ending with the format's header out.
- :mod:`.line_index`, :mod:`.hunk_scanners`, :mod:`.json_scanner`, :mod:`.document_constraint` -- the document constraint of
  the diff-style edit formats: program bytes in, whether the search text can still occur once, the token mask and
  the forced bytes out.
- :mod:`.program_trackers` -- what a decode loop knows of the program being written, per format (events, the
  document's mask and forced run, the result).
- :mod:`.results` -- what an edit run gives back: its events, result and costs.

It imports :mod:`cad_outlines.edits`, :mod:`cad_outlines.engine` and the base modules (errors) only;
torch and transformers are imported inside the functions that need them. Generators and serving import
it; nothing below them does.
"""
