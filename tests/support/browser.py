"""Headless Chromium for the dashboard tests, driven by Playwright's sync API.

Uses the Debian ``chromium`` package (no Playwright browser download)::

    with chromium_page() as page:                   # a fresh context and page, closed afterwards
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']")

    with chromium() as browser:                     # one browser for many pages
        page = browser.new_page()

Without /usr/bin/chromium it fails with one sentence on how to install it: a dashboard test
that cannot run is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]
MISSING = ("Chromium is not installed at /usr/bin/chromium: install the Debian packages `chromium chromium-driver` "
           "with scripts/install-test-tools.sh (it reads .ci/apt-packages.txt)")


def chromium_path() -> str:
    """The chromium executable; raises with one sentence when there is none."""
    path = os.environ.get("VERISCALE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise RuntimeError(MISSING)
    return path


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (Playwright ``Browser``), closed on exit."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def new_page(browser: Any, *, viewport: dict[str, int] | None = None) -> Iterator[Any]:
    """A page in a fresh context of ``browser`` (own cookies); console errors collected on ``page.errors``."""
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 800})
    page = context.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: page.errors.append(msg.text) if msg.type == "error" else None)
    try:
        yield page
    finally:
        context.close()


@contextmanager
def chromium_page(*, viewport: dict[str, int] | None = None) -> Iterator[Any]:
    """One browser and one page, for a script or a single test."""
    with chromium() as browser, new_page(browser, viewport=viewport) as page:
        yield page
