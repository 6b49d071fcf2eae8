"""``python -m cad_outlines.serving``: vLLM's OpenAI-compatible server with our logits processor, the
admission middleware and ``POST /v1/cad/edits`` (:mod:`.http.api_server`; any vLLM server argument)."""

from .http.api_server import main

if __name__ == "__main__":
    main()
