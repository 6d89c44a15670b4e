"""Sessions: a partner's sessions as ``/admin sessions`` lists them (newest first, one user's
if asked), one session's transcript as ``/admin transcript`` hands it to the assistant
(labelled as a third-party record, its newest part only), and ``/admin review`` as a button.

Reading a transcript is audited as ``web transcript``; the review runs the ``/admin review``
handler itself, audited like the command.
"""

from __future__ import annotations

from aiohttp import web

from bot.admin.args import AdminError
from bot.admin.memory import SHORT_ID, find_session
from bot.turn.transcripts import render_transcript
from bot.web import query
from bot.web.pages import WebParts

SESSIONS_PER_PAGE = 50
WEB_TRANSCRIPT_CHARS = 50_000
"""A transcript on the page keeps its newest this many characters (the assistant gets 8,000)."""


def routes(parts: WebParts) -> list[web.RouteDef]:
    pages = SessionPages(parts)
    return [
        web.get("/sessions", pages.index),
        web.get("/sessions/{id}", pages.listing),
        web.post("/sessions/{id}/review", pages.review),
        web.get("/sessions/{id}/{session}", pages.transcript),
    ]


class SessionPages:
    def __init__(self, parts: WebParts) -> None:
        self.parts = parts

    async def index(self, _request: web.Request) -> web.Response:
        partners = self.parts.catalog.all()
        raise web.HTTPSeeOther(f"/sessions/{partners[0].id}" if partners else "/partners")

    async def listing(self, request: web.Request) -> web.Response:
        partner = self.parts.partner(request.match_info["id"])
        user_key = query.text(request, "user") or None
        total = await self.parts.store.partner_session_count(partner.id, user_key)
        pages = query.pages_of(total, SESSIONS_PER_PAGE)
        number = query.page(request, pages)
        shown = await self.parts.store.partner_sessions(
            partner.id, user_key, SESSIONS_PER_PAGE, (number - 1) * SESSIONS_PER_PAGE
        )
        counts = await self.parts.store.message_counts([r.id for r in shown])
        return self.parts.render(
            request,
            "sessions.html",
            partner=partner,
            partners=self.parts.catalog.all(),
            sessions=shown,
            counts=counts,
            total=total,
            user=user_key or "",
            page=number,
            pages=pages,
            short=SHORT_ID,
        )

    async def transcript(self, request: web.Request) -> web.Response:
        partner = self.parts.partner(request.match_info["id"])
        try:
            session = await find_session(self.parts.store, partner, request.match_info["session"])
        except AdminError as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        rows = await self.parts.store.session_messages(session.id)
        zone = self.parts.config.owner_timezone()
        text = render_transcript(partner.name, session, rows, zone, WEB_TRANSCRIPT_CHARS)
        await self.parts.actions.audit("web transcript", partner=partner.id, session=session.id)
        return self.parts.render(
            request, "transcript.html", partner=partner, session=session, text=text
        )

    async def review(self, request: web.Request) -> web.Response:
        partner = self.parts.partner(request.match_info["id"])
        answer = await self.parts.actions.run("review", partner.id)
        raise self.parts.done(request, answer, f"/sessions/{partner.id}")
