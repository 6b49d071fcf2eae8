"""The vendored fixtures in tests/data are the files their MANIFEST names, byte for byte."""

import csv
import hashlib
from pathlib import Path

import pytest

from tests.fixture_data import SMALL, USER_CACHE, require_shared


def _manifest() -> list[dict]:
    with open(SMALL / "MANIFEST.tsv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_every_vendored_file_is_in_the_manifest_with_its_hash_and_licence():
    rows = _manifest()
    listed = {r["path"] for r in rows}
    present = {str(p.relative_to(SMALL)) for p in SMALL.rglob("*") if p.is_file()} - {"MANIFEST.tsv", "README.md"}
    assert present == listed
    for r in rows:
        data = (SMALL / r["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"], r["path"]
        assert len(data) == int(r["bytes"]) and r["license"].strip(), r["path"]


@pytest.mark.shared_data
def test_vendored_files_equal_the_shared_data():
    shared = require_shared()
    for r in _manifest():
        assert (shared / r["path"]).read_bytes() == (SMALL / r["path"]).read_bytes(), r["path"]


def test_the_session_compiles_into_a_temporary_cache(_session_cache, tmp_path_factory):
    """The tests wrote into the user's ~/.cache/cad_outlines (issue 21): the session sets CAD_OUTLINES_CACHE
    to a temp folder (unless the user set it), and subprocesses (the CLI, studies, a server) inherit it."""
    import os
    import subprocess
    import sys

    from cad_outlines.engine.compile import cache_dir

    assert cache_dir() == _session_cache and os.environ["CAD_OUTLINES_CACHE"] == str(_session_cache)
    if USER_CACHE is None:  # the user set none: a temp folder of this session, not ~/.cache/cad_outlines
        assert _session_cache.is_relative_to(tmp_path_factory.getbasetemp())
    else:
        assert str(_session_cache) == USER_CACHE
    code = "from cad_outlines.engine.compile import cache_dir; print(cache_dir())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).resolve().parents[2])
    assert child.stdout.strip() == str(_session_cache)
