"""Where test data comes from.

``SMALL`` (tests/data) holds the fixtures vendored into the repository (GPT-2's tokenizer,
the stories260K model, the small grammars and their samples): the core suite needs
nothing else. Tests that need the shared data folder (``../shared/data`` beside the
clone, or ``$CAD_OUTLINES_DATA``: more tokenizers, the edit corpora) call
:func:`require_shared` or use the ``data_dir`` fixture, and are skipped with
:data:`SKIP_REASON` without it; conftest.py sums those skips up in one line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "tests" / "data"
SKIP_REASON = "needs the shared data folder (../shared/data or CAD_OUTLINES_DATA)"
# The vLLM test modules skip whole (``pytest.importorskip("vllm", reason=VLLM_SKIP_REASON)``) where vLLM is not
# installed: it lives in a venv of its own (.ci/run makes one and runs them there); conftest.py says so in one line.
VLLM_SKIP_REASON = "needs vLLM, installed in a venv of its own (pip install -e '.[vllm]', see docs/serving.md)"
USER_CACHE = os.environ.get("CAD_OUTLINES_CACHE") or None  # as the user started the tests (conftest.py sets one)


def shared_data() -> Path | None:
    """``$CAD_OUTLINES_DATA`` or ``../shared/data`` beside the repository, if it is there. A
    ``$CAD_OUTLINES_DATA`` naming a folder that does not exist means no shared data, even with
    ``../shared/data`` present (``.ci/run`` runs the suite so, as a fresh clone would)."""
    env = os.environ.get("CAD_OUTLINES_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


def require_shared() -> Path:
    """The shared data folder; skips the calling test without it."""
    path = shared_data()
    if path is None:
        pytest.skip(SKIP_REASON)
    return path
