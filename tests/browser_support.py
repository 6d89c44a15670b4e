"""A real headless Chromium for the web page's tests: Debian's ``chromium`` package driven by
Playwright for Python (its async API fits the gateway's event loop, and it waits for elements
by itself, so no test needs a sleep). Playwright's own browser download is never used.

Without ``/usr/bin/chromium`` the tests fail and say what to install (``make browser`` does it
as root on Debian); they are never skipped."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parent / "artifacts" / "web"
"""Screenshots for a reviewer to look at (git-ignored)."""
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000
"""How long an element may take to appear: generous, for a CI machine under load (waits end
as soon as the element is there)."""
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"the web page's browser tests need Chromium at {CHROMIUM}: install Debian's "
            "chromium package (`sudo apt-get install chromium`, or `make browser` as root), "
            "or point the CHROMIUM environment variable at a Chromium binary"
        )
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()


class Tab:
    """One browser tab with the Content-Security-Policy violations its console reported (a
    style, image or script the page's own policy blocked: a page that breaks itself)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            self.errors.append(message.text)

    async def screenshot(self, name: str) -> None:
        """The page at desktop and phone widths, under tests/artifacts/web/."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
            await self.page.set_viewport_size(size)
            await self.page.screenshot(path=str(ARTIFACTS / f"{name}-{label}.png"), full_page=True)
        await self.page.set_viewport_size(DESKTOP)


async def open_tab(browser: Browser, viewport: dict[str, int] | None = None) -> Tab:
    context = await browser.new_context(viewport=viewport or DESKTOP)  # type: ignore[arg-type]
    return Tab(await context.new_page())


async def log_in(tab: Tab, link: str) -> None:
    await tab.page.goto(link)
    await tab.page.get_by_role("button", name="Log in").click()
    await tab.page.get_by_role("heading", name="Status").wait_for()
