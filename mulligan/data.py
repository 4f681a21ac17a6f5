"""Published benchmark files, fetched once into a cache and checked against their sha256.

`mulligan data fetch mbpp|hotpotqa` downloads; the suites then find the cached file
when no --data is given. Nothing else here touches the network, and `--data PATH`
never does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mulligan.defaults import DATA_ENV
from mulligan.errors import UserError

log = logging.getLogger("mulligan")


@dataclass(frozen=True)
class Published:
    """One benchmark file as its authors publish it."""

    url: str
    filename: str
    sha256: str
    what: str


DATASETS: dict[str, Published] = {
    "mbpp": Published(
        url="https://raw.githubusercontent.com/noahshinn/reflexion/main/"
        "programming_runs/benchmarks/mbpp-py.jsonl",
        filename="mbpp-py.jsonl",
        sha256="b429c4433f38e3689b760c8093f549a995dd1fb2355c63926d5c700a197de057",
        what="397 MBPP problems in MultiPL-E format (Reflexion's file; MBPP is CC BY 4.0)",
    ),
    "hotpotqa": Published(
        url="http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
        filename="hotpot_dev_distractor_v1.json",
        sha256="4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea",
        what="HotpotQA dev set, distractor setting, 7,405 questions (CC BY-SA 4.0)",
    ),
}

Download = Callable[[str, Path], None]


def cache_dir() -> Path:
    """$MULLIGAN_DATA_DIR, else the platform's cache folder (XDG on Linux)."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mulligan" / "data"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_url(url: str, target: Path) -> None:
    """Stream `url` into `target` (the only function here that uses the network)."""
    with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:  # noqa: S310
        shutil.copyfileobj(response, out, length=1 << 20)


def _published(name: str) -> Published:
    if name not in DATASETS:
        raise UserError(f"unknown data set {name!r}: choose from {', '.join(DATASETS)}")
    return DATASETS[name]


def cached(name: str) -> Path | None:
    """The fetched file of `name`, if it is in the cache (not re-hashed: fetch checked it)."""
    path = cache_dir() / _published(name).filename
    return path if path.exists() else None


def fetch(name: str, download: Download = download_url) -> tuple[Path, bool]:
    """The cached file of `name`, downloading it first if needed; (path, downloaded).

    A download whose sha256 differs from the published one is deleted and refused."""
    published = _published(name)
    target = cache_dir() / published.filename
    if target.exists() and sha256_of(target) == published.sha256:
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    log.info("downloading %s from %s", published.filename, published.url)
    try:
        download(published.url, partial)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UserError(
            f"could not download {published.url} ({exc}); fetch it yourself and pass --data PATH"
        ) from exc
    got = sha256_of(partial)
    if got != published.sha256:
        partial.unlink()
        raise UserError(
            f"{published.url}: sha256 {got} is not the published {published.sha256}; "
            "nothing was kept (try again, or pass --data PATH with your own copy)"
        )
    partial.replace(target)
    return target, True
