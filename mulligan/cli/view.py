"""`mulligan view`: the episode log in a browser (a local read-only server), or a run's pages
as a static bundle."""

from __future__ import annotations

import argparse
import logging
import threading
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

from mulligan.defaults import DEFAULT_MEMORY
from mulligan.errors import UserError
from mulligan.inputs.memory_files import is_server
from mulligan.memory.reading import MemoryReader, RunRow

if TYPE_CHECKING:
    from mulligan.view.app import Viewer


def _reader(location: str | None) -> MemoryReader:
    location = location or DEFAULT_MEMORY
    if is_server(location):
        raise UserError(f"--memory {location}: the viewer reads the episode log; pass the "
                        "memory directory that holds episodes.db")  # fmt: skip
    if not Path(location).expanduser().is_dir():
        raise UserError(f"--memory {location}: no such directory; pass the memory a run or a "
                        "study made (bench: OUT/memory)")  # fmt: skip
    return MemoryReader(location)


def _warm(viewer: Viewer, runs: list[RunRow]) -> None:
    for run in runs:
        try:
            viewer.made(run.id)
        except Exception:  # its page will say what is wrong when it is asked for
            logging.getLogger("mulligan").debug("view: grid of %s not built", run.id, exc_info=True)


def cmd_view(args: argparse.Namespace) -> int:
    from mulligan.view import app

    reader = _reader(args.memory)
    if args.bundle and not args.run_id:
        raise UserError("--bundle: name the run to write (mulligan view RUN_ID --bundle DIR)")
    viewer, path = app.Viewer(reader), "/"
    if args.bundle:
        from mulligan.view.bundle import write_bundle

        written = write_bundle(reader, args.run_id, Path(args.bundle))
        print(f"wrote {len(written)} files; open {written[0]}")
        return 0
    if args.run_id:  # its grid is built (an unknown run refused) before the URL is printed
        viewer.made(args.run_id)
        path = viewer.links.run(args.run_id)
    else:  # the newest run's grid is built while the runs page is read
        newest = reader.runs()[:1]
        threading.Thread(target=_warm, args=(viewer, newest), daemon=True).start()
    server = app.make_server(viewer, args.port or 0)
    url = app.url_of(server, path)
    print(f"mulligan view: {reader.directory} at {url} (read-only; Ctrl-C stops)", flush=True)
    if not args.no_open:
        webbrowser.open(url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
