"""People: pairing requests to approve or deny, and the users with their access (allow,
block) and check-in settings, a page at a time. The buttons run
``/admin approve|deny|allow|block``. The owner is listed as the owner, without buttons: no
access row decides what the owner may do."""

from __future__ import annotations

from aiohttp import web

from bot.web import query
from bot.web.pages import WebParts, form

VERBS = ("approve", "deny", "allow", "block")
USERS_PER_PAGE = 50
PAIRINGS_SHOWN = 50
"""The oldest this many waiting requests are listed (all of them are counted)."""


def routes(parts: WebParts) -> list[web.RouteDef]:
    async def people(request: web.Request) -> web.Response:
        total = await parts.store.user_count()
        pages = query.pages_of(total, USERS_PER_PAGE)
        number = query.page(request, pages)
        users = await parts.store.web_users(USERS_PER_PAGE, (number - 1) * USERS_PER_PAGE)
        return parts.render(
            request,
            "people.html",
            pending=await parts.store.web_pairings(PAIRINGS_SHOWN),
            waiting=await parts.store.live_pairing_count(),
            users=users,
            owners={u["user_key"] for u in users if parts.actions.access.is_owner(u["user_key"])},
            total=total,
            page=number,
            pages=pages,
        )

    async def act(request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        if verb not in VERBS:
            raise web.HTTPNotFound(text=f"nothing called {verb!r} here")
        data = await form(request)
        subject = data.get("code" if verb in ("approve", "deny") else "user", "")
        answer = await parts.actions.run(verb, subject)
        raise parts.done(request, answer, "/people")

    return [web.get("/people", people), web.post("/people/{verb}", act)]
