"""People: pairing requests to approve or deny, every user with their access (allow, block)
and their check-in settings. The buttons run ``/admin approve|deny|allow|block``."""

from __future__ import annotations

from aiohttp import web

from bot.web.pages import WebParts, form

VERBS = ("approve", "deny", "allow", "block")


def routes(parts: WebParts) -> list[web.RouteDef]:
    async def people(request: web.Request) -> web.Response:
        pending = await parts.store.live_pairings()
        users = await parts.store.web_users()
        names = {u["user_key"]: u["display_name"] for u in users}
        requests = [{**row, "display_name": names.get(row["user_key"], "?")} for row in pending]
        return parts.render(request, "people.html", pending=requests, users=users)

    async def act(request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        if verb not in VERBS:
            raise web.HTTPNotFound(text=f"nothing called {verb!r} here")
        data = await form(request)
        subject = data.get("code" if verb in ("approve", "deny") else "user", "")
        answer = await parts.actions.run(verb, subject)
        raise parts.done(request, answer, "/people")

    return [web.get("/people", people), web.post("/people/{verb}", act)]
