"""Helpers for the web page's tests: a gateway with the page on, the owner's login through
``/admin web``, and a plain aiohttp client on 127.0.0.1 that keeps its cookie."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from tests.admin_support import admin
from tests.conftest import Harness, HarnessFactory

LINK = re.compile(r"(https?://\S+/login/[0-9a-f]+)")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


async def web_harness(factory: HarnessFactory, **web: object) -> Harness:
    return await factory(web={"enabled": True, "port": 0, **web})


async def login_link(harness: Harness) -> str:
    answer = await admin(harness, "/admin web")
    found = LINK.search(answer)
    assert found, answer
    return found.group(1)


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, html[:500]
    return found.group(1)


@asynccontextmanager
async def browser_client() -> AsyncIterator[aiohttp.ClientSession]:
    # unsafe: keep cookies for an IP address host (127.0.0.1), as a browser does
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        yield session


async def log_in(session: aiohttp.ClientSession, link: str) -> str:
    """Press the login button; returns the first page's HTML."""
    async with session.post(link) as response:
        assert response.status == 200, await response.text()
        return await response.text()


def base_of(link: str) -> str:
    return link.split("/login/", 1)[0]
