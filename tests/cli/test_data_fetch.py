"""`mulligan data fetch` keeps checked files in a cache; --data stays offline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mulligan import data
from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.tasks.suites import load_suite

PROBLEM = {
    "name": "mbpp_1_add",
    "language": "py",
    "prompt": 'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n',
    "doctests": "transform",
    "original": "mbpp_1_add.py",
    "prompt_terminology": "reworded",
    "stop_tokens": ["\ndef"],
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3",
}
BODY = (json.dumps(PROBLEM) + "\n").encode()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of our own and an 'mbpp' whose published file is BODY."""
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # no mbpp-py.jsonl lying around here
    published = data.Published(
        url="https://example.invalid/mbpp-py.jsonl",
        filename="mbpp-py.jsonl",
        sha256=hashlib.sha256(BODY).hexdigest(),
        what="test",
    )
    monkeypatch.setitem(data.DATASETS, "mbpp", published)
    return tmp_path / "cache"


def serving(body: bytes, calls: list[str]) -> data.Download:
    def download(url: str, target: Path) -> None:
        calls.append(url)
        target.write_bytes(body)

    return download


def test_fetch_keeps_a_checked_file_and_downloads_it_once(cache: Path) -> None:
    calls: list[str] = []
    path, downloaded = data.fetch("mbpp", serving(BODY, calls))
    assert downloaded and path == cache / "mbpp-py.jsonl" and path.read_bytes() == BODY
    assert data.fetch("mbpp", serving(BODY, calls)) == (path, False)
    assert calls == ["https://example.invalid/mbpp-py.jsonl"]


def test_a_download_with_the_wrong_checksum_is_refused_and_not_kept(cache: Path) -> None:
    with pytest.raises(UserError, match="is not the published"):
        data.fetch("mbpp", serving(BODY + b"tampered", []))
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_failed_download_says_to_pass_data(cache: Path) -> None:
    def offline(url: str, target: Path) -> None:
        target.write_bytes(b"half")
        raise OSError("network unreachable")

    with pytest.raises(UserError, match="pass --data PATH"):
        data.fetch("mbpp", offline)
    assert list(cache.iterdir()) == []


def test_the_suite_finds_the_fetched_file_and_data_still_wins(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="mulligan data fetch mbpp"):
        load_suite("mbpp")
    data.fetch("mbpp", serving(BODY, []))
    assert [t.id for t in load_suite("mbpp").tasks] == ["mbpp_1_add"]
    own = tmp_path / "own.jsonl"
    own.write_text(json.dumps(PROBLEM | {"name": "mbpp_2_own"}) + "\n")
    assert [t.id for t in load_suite("mbpp", data=str(own)).tasks] == ["mbpp_2_own"]


def test_data_list_shows_what_is_cached(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "list"]) == 0
    assert "mbpp      not fetched" in capsys.readouterr().out
    data.fetch("mbpp", serving(BODY, []))
    assert main(["data", "list"]) == 0
    assert f"mbpp      cached       {cache / 'mbpp-py.jsonl'}" in capsys.readouterr().out


def test_the_published_checksums_are_well_formed() -> None:
    for published in data.DATASETS.values():
        assert len(published.sha256) == 64 and int(published.sha256, 16) >= 0
        assert published.url.endswith(published.filename)
