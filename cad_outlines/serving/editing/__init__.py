"""Copy-as-Decode edits on a serving engine: one edit as engine requests, many edits at once.

- :mod:`.served_edit` -- one edit as a sequence of requests (client side, token ids);
  :mod:`.edit_run` -- many edits at once over one engine, and the loops that move them.
- :mod:`.backends` (``LLM``, HTTP), :mod:`.async_backend` (``AsyncLLM``) -- the engines;
  :mod:`.session_channel` -- one engine request per edit (vLLM's streaming-input sessions).
- :mod:`.editor` -- :class:`ServedEditor`, the entry point.

Builds on :mod:`..constraints` (the requests it sends); imports nothing from :mod:`..http`.
"""
