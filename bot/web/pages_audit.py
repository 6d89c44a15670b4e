"""The audit log (filtered, a page at a time) and the status page (channels, queue, last
review per partner, next jobs, version) — the home page."""

from __future__ import annotations

import time
from importlib import metadata

from aiohttp import web

from bot.web import query
from bot.web.pages import WebParts

AUDIT_PAGE_ROWS = 50


def routes(parts: WebParts) -> list[web.RouteDef]:
    async def audit(request: web.Request) -> web.Response:
        search = query.text(request, "q")
        before = query.number(request, "before", query.MAX_ROW_ID)
        rows = await parts.store.audit_page(search, before, AUDIT_PAGE_ROWS)
        older = rows[-1]["id"] if len(rows) == AUDIT_PAGE_ROWS else None
        return parts.render(request, "audit.html", rows=rows, q=search, older=older)

    async def status_page(request: web.Request) -> web.Response:
        return await status(parts, request)

    return [web.get("/audit", audit), web.get("/status", status_page)]


def package_version() -> str:
    try:
        return metadata.version("companion-gateway")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


async def status(parts: WebParts, request: web.Request) -> web.Response:
    admin = parts.actions.admin
    reviews = await parts.store.last_reviews()
    return parts.render(
        request,
        "status.html",
        version=package_version(),
        up_since=admin.started_at,
        now=time.time(),
        channels={name: channel.connected for name, channel in admin.channels.items()},
        queue=await parts.store.pending_count(),
        active=admin.dispatcher.active,
        reviews=[(p, reviews.get(p.id)) for p in parts.catalog.all()],
        jobs=sorted(admin.next_runs().items()),
        pending_pairings=await parts.store.live_pairing_count(),
    )
