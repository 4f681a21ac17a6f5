"""Where each page lives: paths on the local server, or file names in a static bundle (one
flat directory, so every link is relative and opens from a file:// URL)."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote, urlencode


class ServerLinks:
    def runs(self) -> str:
        return "/"

    def run(self, run_id: str, outcome: str = "", strategy: str = "") -> str:
        query = urlencode({k: v for k, v in (("outcome", outcome), ("strategy", strategy)) if v})
        return f"/run/{quote(run_id, safe='')}" + (f"?{query}" if query else "")

    def episode(self, episode_id: str) -> str:
        return f"/episode/{quote(episode_id, safe='')}"

    def lesson(self, lesson_id: str) -> str:
        return f"/lesson/{quote(lesson_id, safe='')}"

    def css(self) -> str:
        return "/static/view.css"


def slug(text: str) -> str:
    """A file name part for any id: readable, and unique by a short hash of the id."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60]
    return f"{readable}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


class BundleLinks:
    """File names in the bundle; a page outside it (another run's episode) has no link."""

    def __init__(self, episodes: set[str], lessons: set[str]) -> None:
        self.episodes = episodes
        self.lessons = lessons

    def runs(self) -> str:
        return "index.html"

    def run(self, run_id: str, outcome: str = "", strategy: str = "") -> str:
        variant = f"--{slug(outcome or 'all')}--{slug(strategy or 'all')}"
        return f"run-{slug(run_id)}{variant if outcome or strategy else ''}.html"

    def episode(self, episode_id: str) -> str:
        """'' when the page is not there (a bundle holds one run's pages)."""
        return f"episode-{slug(episode_id)}.html" if episode_id in self.episodes else ""

    def lesson(self, lesson_id: str) -> str:
        return f"lesson-{slug(lesson_id)}.html" if lesson_id in self.lessons else ""

    def css(self) -> str:
        return "view.css"


Links = ServerLinks | BundleLinks
