"""The vendored fixtures in tests/data are the files their MANIFEST names, byte for byte."""

import csv
import hashlib

import pytest

from tests.fixture_data import SMALL, require_shared


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
