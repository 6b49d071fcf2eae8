import os
from pathlib import Path

import pytest

from tests.fixture_data import SKIP_REASON, SMALL, USER_CACHE, VLLM_SKIP_REASON, require_shared, shared_data

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared data folder (tests using it are skipped without it)."""
    return require_shared()


@pytest.fixture(scope="session")
def small_data() -> Path:
    """tests/data: the vendored fixtures, same layout as the shared data (always there)."""
    return SMALL


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.shared_data`` tests are skipped when the shared data is missing."""
    if shared_data() is None:
        skip = pytest.mark.skip(reason=SKIP_REASON)
        for item in items:
            if item.get_closest_marker("shared_data"):
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line for the tests skipped for want of the shared data, one for those skipped for want of vLLM:
    how many, and how to run them."""
    vllm = [r for r in terminalreporter.stats.get("skipped", []) if VLLM_SKIP_REASON in str(r.longrepr)]
    if vllm:
        terminalreporter.write_line(
            f"{len(vllm)} test modules skipped: they need vLLM, which lives in a venv of its own (its CPU build pins "
            "other versions of torch, lark and transformers); to run them, make one as docs/serving.md says, or as "
            ".ci/run does, and run them there", yellow=True)
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if SKIP_REASON in str(r.longrepr)]
    if skipped:
        env = os.environ.get("CAD_OUTLINES_DATA")
        where = f"CAD_OUTLINES_DATA={env}" if env else REPO.parent / "shared" / "data"
        terminalreporter.write_line(
            f"{len(skipped)} tests skipped: they need the shared data folder (real tokenizers, edit corpora), "
            f"not found at {where}; to run them, put it there or set CAD_OUTLINES_DATA=/path/to/data and run the "
            "same command", yellow=True)


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """The tests compile grammars into a session temp folder, not the user's ~/.cache/cad_outlines:
    ``CAD_OUTLINES_CACHE`` is set for this process and so for every subprocess it starts (the CLI,
    studies, the vLLM server), unless the user set it."""
    if USER_CACHE:
        yield Path(USER_CACHE)
        return
    folder = tmp_path_factory.mktemp("cad_outlines_cache")
    os.environ["CAD_OUTLINES_CACHE"] = str(folder)
    try:
        yield folder
    finally:
        os.environ.pop("CAD_OUTLINES_CACHE", None)


@pytest.fixture(scope="session", autouse=True)
def _library_log_handlers():
    """transformers' log handler writes to the sys.stderr of the moment it is made: made inside a test's
    capsys, it writes to a closed stream in every later test (a "--- Logging error --- Traceback" in
    their stderr). Made here, it writes to the session's stream."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    hf_logging.get_logger("transformers")
    yield


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tests check behaviour, not speed: one intra-op thread avoids the oversubscription
    slowdowns of tiny models on a busy 2-core machine."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny(small_data):
    """The real tiny model (stories260K, SentencePiece vocabulary), vendored in tests/data."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = small_data / "models/stories260K_hf"
    return AutoModelForCausalLM.from_pretrained(path).eval(), PreTrainedTokenizerFast.from_pretrained(path)


@pytest.fixture(scope="session")
def editor(tiny, tmp_path_factory):
    """A CopyEditor on the tiny model, with its own grammar cache."""
    from cad_outlines.generators.copy_decode import CopyEditor

    return CopyEditor(*tiny, cache=tmp_path_factory.mktemp("cache"))


@pytest.fixture(autouse=True, scope="module")
def _serving_admission_state_per_module():
    """The admission gate's process-wide facts (the served model's vocabulary size, that a middleware
    stands in front) describe one server process serving one model; test modules build several, so each
    module starts without the last one's."""
    yield
    import sys

    admission = sys.modules.get("cad_outlines.serving.constraints.admission")
    if admission is not None:
        admission._VOCAB_SIZES.clear()
        admission._GATE_REQUIRED[0] = False
