"""The report as a reader sees it: report.html of a demo study, opened in headless Chromium at
a laptop's viewport, shows its headline (model, suite, verdicts) above the fold, and no table
runs past the edge of the page. Needs Debian's `chromium` and the playwright package (both
installed by .ci/run)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from mulligan.cli import main

FOLD = 900
"""Pixels of a laptop's screen height the headline must end within."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    assert chromium, "install Chromium: apt-get install -y chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    return out / "report.html"


@pytest.mark.parametrize("width", [1280, 1024])
def test_the_headline_is_above_the_fold_and_no_table_is_wider_than_the_page(
    browser: Any, report: Path, width: int
) -> None:
    page = browser.new_page(viewport={"width": width, "height": FOLD})
    page.goto(report.as_uri())
    headline = page.locator(".headline")
    assert "scripted-demo" in headline.inner_text() and "than react" in headline.inner_text()
    box = headline.bounding_box()
    assert box is not None and box["y"] + box["height"] <= FOLD
    viewport = page.evaluate("document.documentElement.clientWidth")
    rights = page.evaluate(
        "[...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().right)"
    )
    assert len(rights) >= 5 and max(rights) <= viewport
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport  # no sideways scroll
    plots = page.evaluate(
        "[...document.querySelectorAll('.plots img')].map(i => i.getBoundingClientRect().width)"
    )
    # side by side, each readable: three of success, two of the frontier (no dollars: no price)
    assert len(plots) == 5 and min(plots) >= 300
    page.close()
