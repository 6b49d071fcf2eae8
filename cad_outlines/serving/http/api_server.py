"""vLLM's OpenAI-compatible server with Copy-as-Decode edits: ``POST /v1/cad/edits``.

    python -m cad_outlines.serving --model MODEL_DIR --host 127.0.0.1 --port 8000 \\
        --enable-prefix-caching --block-size 32 [any other vLLM server argument]

It is vLLM's own server (``vllm.entrypoints.launchers.api_server.entry``: the same
arguments, routes and middleware) with :class:`~.edit_endpoint.EditEndpointPlugin`
attached the way vLLM attaches endpoint plugins -- its router after the core routers
(``build_app``), its state after the core state (``init_app_state``) -- so it works from a
source checkout, with no package entry point and no ``VLLM_PLUGINS``. Our logits
processor is added to ``--logits-processors`` when it is not named there (the edits need
it). One API server process (``--api-server-count`` 1, the default).
"""

from __future__ import annotations

import sys

from . import PROCESSOR
from .edit_endpoint import EditEndpointPlugin

__all__ = ["main", "patch_vllm_server"]

_PROCESSOR_MODULE = "cad_outlines.serving.constraints.vllm_processor:CadLogitsProcessor"  # the same class, by its module


def patch_vllm_server(plugin: EditEndpointPlugin | None = None) -> EditEndpointPlugin:
    """Make vLLM's single-process API server attach `plugin` (default: the edit endpoint):
    wraps the ``build_app`` and ``init_app_state`` that its entry module calls."""
    from vllm.entrypoints.launchers.api_server import entry

    plugin = plugin or EditEndpointPlugin()
    build_app, init_app_state = entry.build_app, entry.init_app_state
    if getattr(build_app, "_cad_outlines", False):
        return plugin

    def build_app_with_edits(args, *a, **kw):
        app = build_app(args, *a, **kw)
        plugin.attach_router(app)
        return app

    async def init_app_state_with_edits(engine_client, state, args, *a, **kw):
        await init_app_state(engine_client, state, args, *a, **kw)
        await plugin.init_state(engine_client, state, args)

    build_app_with_edits._cad_outlines = True
    entry.build_app, entry.init_app_state = build_app_with_edits, init_app_state_with_edits
    return plugin


def _with_processor(argv: list[str]) -> list[str]:
    """`argv` with our logits processor in ``--logits-processors`` (added if missing)."""
    if any(name in a for a in argv for name in (PROCESSOR, _PROCESSOR_MODULE)):
        return argv
    if any(a == "--logits-processors" or a.startswith("--logits-processors=") for a in argv):
        raise SystemExit(f"--logits-processors must name {PROCESSOR} (the edits need it) among the others")
    return [*argv, "--logits-processors", PROCESSOR]


def main(argv: list[str] | None = None) -> None:
    """Run vLLM's API server with the edit route (arguments: vLLM's own)."""
    from vllm.entrypoints.launchers.api_server import entry

    argv = _with_processor(list(sys.argv[1:] if argv is None else argv))
    if any(a == "--api-server-count" or a.startswith("--api-server-count=") for a in argv):
        raise SystemExit("python -m cad_outlines.serving runs one API server process: drop --api-server-count")
    patch_vllm_server()
    sys.argv = [sys.argv[0], *argv]
    entry.main()


if __name__ == "__main__":
    main()
