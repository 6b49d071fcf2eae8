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
