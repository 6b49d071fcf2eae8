import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data() -> Path | None:
    env = os.environ.get("CAD_OUTLINES_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data()
    if path is None:
        pytest.skip("../shared/data not available")
    return path


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
def tiny(data_dir):
    """The real tiny model of the shared data (stories260K, SentencePiece vocabulary)."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = data_dir / "models/stories260K_hf"
    return AutoModelForCausalLM.from_pretrained(path).eval(), PreTrainedTokenizerFast.from_pretrained(path)


@pytest.fixture(scope="session")
def editor(tiny, tmp_path_factory):
    """A CopyEditor on the tiny model, with its own grammar cache."""
    from cad_outlines.generators.copy_decode import CopyEditor

    return CopyEditor(*tiny, cache=tmp_path_factory.mktemp("cache"))
