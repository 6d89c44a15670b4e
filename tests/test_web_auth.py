"""Who gets into the owner's web page, over plain HTTP on 127.0.0.1: the one-time link from
``/admin web`` (once, in time, only the owner's), the session cookie, the CSRF token on every
change, the security headers on every answer, and file names that cannot leave their place."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from bot.commands.table import UNKNOWN
from bot.config.model import ConfigError
from bot.web.auth import COOKIE_NAME, secret_hash
from bot.web.security import CONTENT_SECURITY_POLICY
from tests.admin_support import admin, partner_dir
from tests.conftest import Harness, HarnessFactory, dm
from tests.web_support import base_of, browser_client, csrf_of, log_in, login_link, web_harness


async def test_the_link_logs_the_owner_in_once(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    link = await login_link(harness)
    async with browser_client() as browser:
        async with browser.get(link) as response:  # what a link preview does: spends nothing
            assert response.status == 200
            assert COOKIE_NAME not in response.cookies
        page = await log_in(browser, link)
        assert "Status" in page and "Log out" in page
        async with browser.post(link) as again:
            assert again.status == 403
            assert "expired or was used" in await again.text()
    async with browser_client() as other, other.post(link) as stolen:
        assert stolen.status == 403


async def test_the_session_cookie_is_httponly_and_strict(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    link = await login_link(harness)
    async with browser_client() as browser:
        async with browser.post(link, allow_redirects=False) as response:
            assert response.status == 303
            cookie = response.cookies[COOKIE_NAME]
        assert cookie["httponly"] is True
        assert cookie["samesite"] == "Strict"
        assert not cookie["secure"]
        # the store keeps only the hash of the cookie's value
        assert await harness.app.store.web_session(secret_hash(cookie.value)) is not None
        assert await harness.app.store.web_session(cookie.value) is None


async def test_behind_https_the_cookie_is_secure(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory, public_url="https://companion.example.org")
    link = await login_link(harness)
    assert link.startswith("https://companion.example.org/login/")
    port = harness.app.web.port if harness.app.web else 0
    local = f"http://127.0.0.1:{port}/login/" + link.rsplit("/", 1)[1]
    async with browser_client() as browser, browser.post(local, allow_redirects=False) as response:
        assert response.cookies[COOKIE_NAME]["secure"] is True


async def test_an_expired_link_opens_nothing(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    link = await login_link(harness)
    token = "0" * 64
    # a link issued more than ten minutes ago: its time is up
    await harness.app.store.add_web_login(secret_hash(token), -1.0)
    expired = base_of(link) + "/login/" + token
    async with browser_client() as browser:
        async with browser.post(expired) as response:
            assert response.status == 403
            assert "expired" in await response.text()
        async with browser.get(base_of(link) + "/") as page:
            assert page.status == 403


async def test_a_non_owner_gets_no_link(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    before = len(harness.channel.sent)
    await harness.send(dm(77, "/admin web", name="Mallory"))
    await harness.settle()
    answers = [m.text for m in harness.channel.sent[before:]]
    assert answers == [UNKNOWN]
    assert not any("/login/" in text for text in harness.channel.texts())


async def test_a_guessed_link_opens_nothing(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    link = await login_link(harness)
    guessed = link[:-4] + ("0000" if not link.endswith("0000") else "1111")
    async with browser_client() as browser, browser.post(guessed) as response:
        assert response.status == 403


async def test_every_page_needs_a_session(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    base = base_of(await login_link(harness))
    async with browser_client() as stranger:
        for path in (
            "/",
            "/partners",
            "/memory",
            "/people",
            "/usage",
            "/audit",
            "/journals",
            "/sessions/example",
        ):
            async with stranger.get(base + path) as response:
                assert response.status == 403, path
                assert "/admin web" in await response.text()
        stranger.cookie_jar.update_cookies({COOKIE_NAME: "forged"})
        async with stranger.get(base + "/partners") as response:
            assert response.status == 403


async def logged_in(harness: Harness) -> tuple[aiohttp.ClientSession, str, str]:
    """A logged-in client (close it), the site's address and its CSRF token."""
    link = await login_link(harness)
    browser = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    page = await log_in(browser, link)
    return browser, base_of(link), csrf_of(page)


async def seen_user(harness: Harness, user_id: int, name: str) -> str:
    await harness.send(dm(user_id, "/start", name=name))
    await harness.settle()
    return f"test:{user_id}"


async def test_a_change_without_the_csrf_token_is_refused(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    user = await seen_user(harness, 42, "Bob")
    browser, base, csrf = await logged_in(harness)
    async with browser:
        async with browser.post(base + "/people/block", data={"user": user}) as response:
            assert response.status == 403
            assert "security token" in await response.text()
        assert (await harness.app.store.user(user) or {})["access"] != "blocked"
        wrong = {"user": user, "csrf": csrf[:-2] + "xx"}
        async with browser.post(base + "/people/block", data=wrong) as response:
            assert response.status == 403
        async with browser.post(base + "/people/block", data={"user": user, "csrf": csrf}) as ok:
            assert ok.status == 200
            assert f"{user} is now blocked" in await ok.text()
    assert (await harness.app.store.user(user) or {})["access"] == "blocked"
    rows = await harness.app.store.audit_rows("admin block")
    assert rows[0]["actor"] == "web:owner"


async def test_a_cookie_from_another_session_does_not_carry_its_token(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    user = await seen_user(harness, 43, "Carol")
    first, base, first_csrf = await logged_in(harness)
    second, _, second_csrf = await logged_in(harness)
    assert first_csrf != second_csrf
    async with first, second:
        # the first browser's cookie with the second session's token
        data = {"user": user, "csrf": second_csrf}
        async with first.post(base + "/people/block", data=data) as response:
            assert response.status == 403
        assert (await harness.app.store.user(user) or {})["access"] != "blocked"
        answer = await admin(harness, "/admin web logout")
        assert "2 session(s) ended" in answer
        async with second.get(base + "/partners") as response:
            assert response.status == 403


async def test_file_names_cannot_leave_their_place(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    preset = partner_dir(harness) / "preset.yml"
    before = preset.read_bytes()
    browser, base, csrf = await logged_in(harness)
    async with browser:
        for path in (
            "/partners/example/files/..%2Fpreset.yml",
            "/partners/example/files/preset.yml",
            "/partners/..%2F..%2Fowner/files/MEMORY.md",
            "/memory/example/users/..%2F..%2Fpreset",
            "/memory/example/users/..",
            "/journals/example/..%2Fpreset",
            "/static/..%2F..%2Fweb%2Fauth.py",
            "/static/../auth.py",
        ):
            async with browser.get(base + path) as response:
                body = await response.text()
                assert response.status in (403, 404), path
                assert "secret_hash" not in body and "memory_scope" not in body, path
        edit = {"csrf": csrf, "partner": "example", "file": "../preset.yml", "entry": "m_1"}
        async with browser.post(base + "/memory/edit", data={**edit, "text": "x"}) as response:
            assert response.status == 404
        save = {"csrf": csrf, "text": "owned", "version": "x", "step": "save"}
        async with browser.post(base + "/partners/example/files/..%2Fpreset.yml", data=save) as r:
            assert r.status == 404
    assert preset.read_bytes() == before


async def test_every_answer_carries_the_security_headers(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for path in ("/", "/partners/example", "/usage", "/nowhere", "/static/style.css"):
            async with browser.get(base + path) as response:
                assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
                assert response.headers["Referrer-Policy"] == "no-referrer"
    async with browser_client() as stranger, stranger.get(base + "/") as response:
        assert response.status == 403
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src" not in CONTENT_SECURITY_POLICY  # default-src 'none' forbids script


async def test_what_users_wrote_is_shown_as_text(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    name = '<script>alert("x")</script>\u202eevil'
    await seen_user(harness, 44, name)
    browser, base, _ = await logged_in(harness)
    async with browser, browser.get(base + "/people") as response:
        page = await response.text()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;evil" in page
    assert "\u202e" not in page


async def test_with_the_page_off_the_command_says_how_to_turn_it_on(harness: Harness) -> None:
    answer = await admin(harness, "/admin web")
    assert "The web page is off" in answer and "[web]" in answer
    assert harness.app.web is None


async def test_a_port_in_use_stops_the_start_with_the_fix(harness_factory: HarnessFactory) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"127\.0\.0\.1:{port}.*pick another port"):
            await harness_factory(web={"enabled": True, "port": port})
