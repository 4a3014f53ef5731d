"""Headless Chromium for the dashboard's browser tests: Debian's ``/usr/bin/chromium`` driven by
Playwright (no browser download: ``playwright install`` is never run), a fresh profile per
browser, no network beyond loopback in use.

Screenshots go to the test's directory; with ``MILLRACE_DASHBOARD_SCREENSHOTS=DIR`` (see
``scripts/dashboard_screenshots.sh``) they are also written as ``DIR/dashboard-NAME.png``, which
is how ``docs/images/`` is refreshed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.real_parts import part_unavailable

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = "MILLRACE_DASHBOARD_SCREENSHOTS"
WAIT_MS = 30_000


@contextmanager
def chromium_context(profile: Path) -> Iterator[Any]:
    """A Playwright BrowserContext of a new headless Chromium with profile ``profile``.

    Yields:
        The context; its pages collect their JavaScript errors in ``page.errors`` (see
        :func:`open_page`). The browser is closed (its processes ended) on exit.

    Raises:
        pytest.fail.Exception: If Chromium cannot start (``tests/real_parts.py``).
    """
    from playwright.sync_api import Error, sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        part_unavailable("Chromium", f"{CHROMIUM} is missing (scripts/ensure_system_deps.sh)")
    with sync_playwright() as playwright:
        try:
            context = playwright.chromium.launch_persistent_context(
                str(profile),
                executable_path=CHROMIUM,
                args=ARGS,
                headless=True,
                viewport={"width": 1400, "height": 900},
                timeout=WAIT_MS,
            )
        except Error as error:
            part_unavailable("Chromium", error)
        context.set_default_timeout(WAIT_MS)
        try:
            yield context
        finally:
            context.close()


def open_page(context: Any, url: str) -> Any:
    """A new page at ``url`` that records uncaught JavaScript errors in ``page.errors``."""
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("dialog", lambda dialog: dialog.accept())  # confirm() of cancel and stop
    page.goto(url)
    return page


def go(page: Any, route: str) -> None:
    """Show ``route`` (``#/jobs/...``) and wait until the page shows it (a refresh of that
    route has completed)."""
    shown = page.evaluate("route => { location.hash = route; return location.hash; }", route)
    page.wait_for_function(
        "hash => document.getElementById('content').dataset.route === hash", arg=shown
    )


def screenshot(page: Any, directory: Path, name: str) -> Path:
    """Save the whole page as ``directory/NAME.png`` (and to $MILLRACE_DASHBOARD_SCREENSHOTS)."""
    assert re.fullmatch(r"[a-z0-9-]+", name), name
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    target = os.environ.get(SCREENSHOTS)
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(target) / f"dashboard-{name}.png"), full_page=True)
    return path


def number(text: str) -> int:
    """A figure as the page shows it ("12,345") as an int."""
    return int(text.replace(",", "").strip())
