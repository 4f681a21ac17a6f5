"""The viewer's local web server: the standard library's threading HTTP server on 127.0.0.1,
answering GET with the pages of `pages` over a read-only memory."""

from __future__ import annotations

import html
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mulligan.errors import UserError, listen_refusal
from mulligan.memory.log import UnreadableLog
from mulligan.memory.reading import MemoryReader
from mulligan.report.cells import Grid
from mulligan.report.stats import RunStats
from mulligan.view import pages
from mulligan.view.links import ServerLinks

log = logging.getLogger("mulligan")

HOST = "127.0.0.1"
SECURITY = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Every answer: no script runs, nothing loads from elsewhere."""

Answer = tuple[HTTPStatus, str, bytes]
Made = tuple[RunStats, Grid]


class Viewer:
    """Paths to pages: `/`, `/run/ID?outcome=&strategy=`, `/episode/ID`, `/lesson/ID`."""

    def __init__(self, reader: MemoryReader) -> None:
        self.reader = reader
        self.links = ServerLinks()
        self._grids: dict[str, tuple[tuple[Any, ...], Made]] = {}
        self._lock = threading.Lock()

    def made(self, run_id: str) -> Made:
        """The run's numbers and grid, built again only when the run has logged more."""
        signature = self.reader.signature(run_id)
        with self._lock:
            cached = self._grids.get(run_id)
        if cached is not None and cached[0] == signature:
            return cached[1]
        made = pages.run_grid(self.reader, run_id)
        with self._lock:
            self._grids[run_id] = (signature, made)
        return made

    def answer(self, target: str) -> Answer:
        parts = urlsplit(target)
        try:
            found = self._page(parts.path, parse_qs(parts.query))
        except UnreadableLog as exc:
            return _refused(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        except UserError as exc:
            return _refused(HTTPStatus.NOT_FOUND, str(exc))
        return found or _refused(HTTPStatus.NOT_FOUND, f"no page at {parts.path}")

    def _page(self, path: str, query: dict[str, list[str]]) -> Answer | None:
        kind, _, rest = path.lstrip("/").partition("/")
        name = unquote(rest)
        if path == "/":
            return _html(pages.runs_page(self.reader, self.links))
        if kind == "run" and name:
            outcome, strategy = query.get("outcome", [""])[-1], query.get("strategy", [""])[-1]
            made = self.made(name)
            return _html(pages.run_page(self.reader, self.links, name, outcome, strategy, made))
        if kind == "episode" and name:
            return _html(pages.episode_page(self.reader, self.links, name))
        if kind == "lesson" and name:
            return _html(pages.lesson_page(self.reader, self.links, name))
        if path == "/static/view.css":
            return HTTPStatus.OK, "text/css; charset=utf-8", pages.stylesheet().encode()
        return None


def _html(text: str) -> Answer:
    return HTTPStatus.OK, "text/html; charset=utf-8", text.encode()


def _refused(status: HTTPStatus, message: str) -> Answer:
    title, text = status.phrase.lower(), html.escape(message)
    body = f"<!doctype html><title>{title}</title><p>{text}<p><a href='/'>runs</a>"
    return status, "text/html; charset=utf-8", body.encode()


def handler_for(viewer: Viewer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "mulligan-view"

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            port = self.connection.getsockname()[1]
            if self.headers.get("Host") in (f"{HOST}:{port}", f"localhost:{port}"):
                status, kind, body = viewer.answer(self.path)
            else:  # another name for 127.0.0.1 (DNS rebinding): a web page reading the log
                status, kind, body = HTTPStatus.MISDIRECTED_REQUEST, "text/plain", b"wrong host"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in SECURITY.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            log.debug("view: " + format, *args)

    return Handler


def make_server(viewer: Viewer, port: int = 0) -> ThreadingHTTPServer:
    """Bound to 127.0.0.1 (`port` 0: a free one); the caller serves and closes it."""
    try:
        server = ThreadingHTTPServer((HOST, port), handler_for(viewer))
    except OSError as exc:
        raise UserError(listen_refusal(port, exc, HOST)) from None
    server.daemon_threads = True
    return server


def url_of(server: ThreadingHTTPServer, path: str = "/") -> str:
    return f"http://{HOST}:{server.server_address[1]}{path}"
