"""A run's pages as static files in one directory: they open without a server (every link
is a relative file name), the grid's filters as one page per outcome and strategy.

A page is written whole or not at all (beside its place under a hidden name, then renamed
into it), and the mark naming every file is written before the first page: a process
killed while writing leaves whole pages, at most one hidden part-page, and a mark, so the
next bundle into the directory is let in and writes it over, removing the part-page."""

from __future__ import annotations

import json
from pathlib import Path

from mulligan.errors import UserError
from mulligan.inputs.paths import output_directory, write_whole
from mulligan.memory.reading import MemoryReader
from mulligan.report.cells import OUTCOMES
from mulligan.view import pages
from mulligan.view.links import BundleLinks

MARK = ".mulligan-view-bundle"
"""The file a bundle keeps of what it wrote: only a directory holding it is written over."""
WRITING = ".mulligan-view-writing-"
"""The prefix of a file being written (renamed to its own name once whole)."""


def _ours(directory: Path) -> list[Path]:
    """What a bundle killed while writing a file left: the file's hidden part."""
    return sorted(directory.glob(f"{WRITING}*"))


def _refuse_foreign(directory: Path) -> list[str]:
    """The files an earlier bundle in `directory` wrote (none: a new or empty directory)."""
    output_directory(directory, "--bundle")
    if not directory.exists() or set(directory.iterdir()) <= set(_ours(directory)):
        return []
    mark = directory / MARK
    if not mark.is_file():
        raise UserError(f"--bundle {directory}: not empty and not a bundle `mulligan view` "
                        "wrote; pass a new or empty directory")  # fmt: skip
    try:
        written = json.loads(mark.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        raise UserError(
            f"--bundle {directory}: {MARK} is unreadable; pass a new directory"
        ) from None
    return [str(name) for name in written]


def write_bundle(reader: MemoryReader, run_id: str, directory: Path) -> list[Path]:
    """Write the run's pages (runs, grid and its filtered views, episodes, lessons) and the
    stylesheet; returns the files written, the runs page first."""
    reader.run(run_id)  # an unknown run is refused before anything is written
    previous = _refuse_foreign(directory)
    episodes = [str(row["id"]) for row in reader.log.episodes(run_id)]
    lessons = reader.lesson_ids_of_run(run_id)
    known = set(reader.log.known_ids(lessons))
    links = BundleLinks(set(episodes), known)
    made = pages.run_grid(reader, run_id)
    files: dict[str, str] = {
        links.runs(): pages.runs_page(reader, links, only=[run_id]),
        links.css(): pages.stylesheet(),
    }
    for outcome in ["", *OUTCOMES]:
        for strategy in ["", *made[1].labels]:
            page = pages.run_page(reader, links, run_id, outcome, strategy, made=made)
            files[links.run(run_id, outcome, strategy)] = page
    for episode_id in episodes:
        files[links.episode(episode_id)] = pages.episode_page(reader, links, episode_id)
    for lesson_id in sorted(known):
        files[links.lesson(lesson_id)] = pages.lesson_page(reader, links, lesson_id)
    directory.mkdir(parents=True, exist_ok=True)
    for part in _ours(directory):
        part.unlink()
    every = sorted(set(files) | {n for n in previous if "/" not in n and n != MARK})
    write_whole(directory / MARK, json.dumps({"run": run_id, "files": every}), WRITING)
    for name in previous:
        if name not in files and "/" not in name and name != MARK:
            (directory / name).unlink(missing_ok=True)
    for name, text in files.items():
        write_whole(directory / name, text, WRITING)
    write_whole(directory / MARK, json.dumps({"run": run_id, "files": sorted(files)}), WRITING)
    return [directory / name for name in files]
