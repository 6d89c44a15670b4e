"""Hostile addresses on the owner's web page: a query value that is not what the page takes
gets a 400 that names it, every answer (errors, redirects, files) carries the security
headers, long lists come from the store a page at a time, and a redirect never leaves the
site."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.web.security import CONTENT_SECURITY_POLICY
from tests.admin_support import partner_dir
from tests.conftest import Harness, HarnessFactory
from tests.test_web_auth import logged_in
from tests.test_web_pages import page
from tests.web_support import browser_client, log_in, login_link, web_harness

NUMBER_PARAMETERS = (
    ("/people", "page"),
    ("/sessions/example", "page"),
    ("/memory", "page"),
    ("/memory/example", "page"),
    ("/audit", "before"),
    ("/usage", "days"),
    ("/journals/example", "year"),
)
NOT_NUMBERS = ("²", "٣", "-1", "0", "1e9", "abc", "0x10", " 1", "1.5", "9" * 100)
OFF_SITE = (
    "/\t/evil.example",
    "/\n/evil.example",
    "\r//evil.example",
    "//evil.example",
    "///evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "https://evil.example",
    "javascript:alert(1)",
    "/%09/evil.example",
    "/%2F/evil.example",
    " /x",
    "people",
    "",
)


def has_security_headers(response: aiohttp.ClientResponse) -> bool:
    return (
        response.headers.get("Content-Security-Policy") == CONTENT_SECURITY_POLICY
        and response.headers.get("X-Content-Type-Options") == "nosniff"
        and response.headers.get("Referrer-Policy") == "no-referrer"
    )


async def test_a_number_that_is_not_one_gets_a_400_naming_it(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for path, name in NUMBER_PARAMETERS:
            for value in NOT_NUMBERS:
                async with browser.get(base + path, params={name: value}) as response:
                    body = await response.text()
                    assert response.status == 400, (path, name, value, body[:300])
                    assert f"{name} must be a whole number from 1 to" in body, body[:300]
                    assert has_security_headers(response), (path, value)


async def test_a_parameter_given_twice_is_refused(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser, browser.get(base + "/sessions/example?page=1&page=2") as response:
        assert response.status == 400
        assert "page is given twice" in await response.text()


async def test_an_overlong_search_text_is_refused(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for path, name in (("/audit", "q"), ("/memory", "find"), ("/memory/example", "q")):
            async with browser.get(base + path, params={name: "x" * 1000}) as response:
                assert response.status == 400, path
                assert f"{name} is longer than" in await response.text()


async def test_a_control_character_in_a_text_is_refused(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for path, name in (("/audit", "q"), ("/sessions/example", "user")):
            async with browser.get(base + path, params={name: "a\x00b"}) as response:
                assert response.status == 400, path
                assert f"{name} contains a control character" in await response.text()


async def test_an_empty_value_is_the_same_as_none(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for path, name in NUMBER_PARAMETERS:
            async with browser.get(base + path, params={name: ""}) as response:
                assert response.status == 200, (path, await response.text())


async def test_errors_redirects_and_files_carry_the_security_headers(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    async with browser:
        answers = [
            browser.get(base + "/people?page=%C2%B2"),  # 400
            browser.put(base + "/people", data={"csrf": csrf}),  # 405
            browser.get(base + "/partners/nobody"),  # 404
            browser.get(base + "/sessions", allow_redirects=False),  # 303
            browser.post(base + "/people/allow", data={"csrf": csrf}, allow_redirects=False),
            browser.head(base + "/static/style.css"),
            browser.get(base + "/static/nothing.css"),
        ]
        statuses = []
        for answer in answers:
            async with answer as response:
                statuses.append(response.status)
                assert has_security_headers(response), (response.url, response.status)
    assert statuses == [400, 405, 404, 303, 303, 200, 404]


async def test_an_unexpected_error_gets_a_500_page_with_the_headers(
    harness_factory: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    harness = await web_harness(harness_factory)

    async def broken(_request: web.Request) -> web.Response:
        raise RuntimeError("the secret detail of a bug")

    async with served_with_route(harness, "/broken", broken) as base, browser_client() as browser:
        link = await login_link(harness)
        await log_in(browser, base + "/login/" + link.rsplit("/", 1)[1])
        with caplog.at_level(logging.ERROR, logger="bot.web"):
            async with browser.get(base + "/broken") as response:
                body = await response.text()
                assert response.status == 500
                assert has_security_headers(response)
    assert "an error was logged" in body and "secret detail" not in body
    assert any("GET /broken" in r.getMessage() and r.exc_info for r in caplog.records)


@asynccontextmanager
async def served_with_route(
    harness: Harness, path: str, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> AsyncIterator[str]:
    """The gateway's web application with one more route, served on 127.0.0.1: its address."""
    assert harness.app.web is not None
    app = harness.app.web.application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_a_back_address_must_be_a_path_on_this_site(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    async with browser:
        for back in (*OFF_SITE, "/people?page=2"):
            data = {"csrf": csrf, "change": "c_none", "back": back}
            async with browser.post(
                base + "/memory/undo", data=data, allow_redirects=False
            ) as response:
                assert response.status == 303, (back, await response.text())
                expected = "/people?page=2" if back == "/people?page=2" else "/memory"
                assert response.headers["Location"] == expected, repr(back)


def spy_on(harness: Harness, method: str) -> list[int]:
    """How many rows each call of a store method returned (the call itself goes through)."""
    store: Any = harness.app.store
    real = getattr(store, method)
    returned: list[int] = []

    async def counting(*args: Any, **kwargs: Any) -> Any:
        rows = await real(*args, **kwargs)
        returned.append(len(rows))
        return rows

    setattr(store, method, counting)
    return returned


USER_KEY = re.compile(r"<td>([a-z]+:\d+)</td>")


async def test_people_come_from_the_store_a_page_at_a_time(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    for n in range(120):
        await harness.app.store.upsert_user(f"web:{n}", "web", str(n), f"Person {n}", None)
    returned = spy_on(harness, "web_users")
    browser, base, _ = await logged_in(harness)
    async with browser:
        first = await page(browser, base + "/people")
        second = await page(browser, base + "/people?page=2")
        last = await page(browser, base + "/people?page=3")
        past = await page(browser, base + "/people?page=999")
    shown = [USER_KEY.findall(html) for html in (first, second, last)]
    # the owner, who asked for the login link, is a user too
    assert [len(keys) for keys in shown] == [50, 50, 21]
    assert len({key for keys in shown for key in keys}) == 121
    assert 'href="/people?page=2"' in first and "page 1 of 3" in first
    assert USER_KEY.findall(past) == shown[2]
    assert returned and max(returned) <= 50


async def test_waiting_pairings_are_shown_up_to_a_bound(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    for n in range(60):
        await harness.app.store.create_pairing(f"CODE{n:03d}", f"web:{n}", 3600)
    browser, base, _ = await logged_in(harness)
    async with browser:
        people = await page(browser, base + "/people")
    assert len(re.findall(r'name="code" value="CODE\d+"', people)) == 2 * 50  # approve, deny
    assert "60 waiting, the oldest 50 shown" in people


async def test_a_partners_sessions_come_from_the_store_a_page_at_a_time(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    for n in range(60):
        await harness.app.store.create_session(
            partner_id="example", chat_key=f"web:{n}", user_key=f"web:{n}",
            audience=f"user:web:{n}", system_prompt="",
        )  # fmt: skip
    returned = spy_on(harness, "partner_sessions")
    browser, base, _ = await logged_in(harness)
    async with browser:
        first = await page(browser, base + "/sessions/example")
        second = await page(browser, base + "/sessions/example?page=2")
    assert "60 sessions" in first and "page 1 of 2" in first
    assert first.count('<td class="id">') == 50 and second.count('<td class="id">') == 10
    assert returned and max(returned) <= 50


async def test_a_journal_day_is_only_a_yyyy_mm_dd_date(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for day in ("20260310", "2026-W10-1", "2026-03-10T00:00", "２０２６-03-10"):
            async with browser.get(base + f"/journals/example/{day}") as response:
                assert response.status == 404, day
                assert "YYYY-MM-DD" in await response.text()


async def test_a_partners_user_files_are_listed_up_to_a_bound_and_found_by_name(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    users = partner_dir(harness) / "users"
    users.mkdir(exist_ok=True)
    for n in range(150):
        (users / f"test-{n}.md").write_text(f"- likes tea {n}\n", encoding="utf-8")
    browser, base, _ = await logged_in(harness)
    async with browser:
        listing = await page(browser, base + "/memory/example")
        found = await page(browser, base + "/memory/example?user=test-14")
    links = re.compile(r'href="/memory/example/users/([a-z0-9-]+)"')
    assert len(links.findall(listing)) == 100 and "150 per-user files" in listing
    assert sorted(links.findall(found)) == sorted(["test-14", *(f"test-14{n}" for n in range(10))])
