"""What every page module shares: the parts a page reads, templates (autoescaped), notes that
survive the redirect after a change, and the small helpers that turn an address into a
partner or a 404."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jinja2
from aiohttp import web

from bot.config.model import Config
from bot.store import Store
from bot.text.literal import BIDI_CONTROLS
from bot.web.actions import OwnerActions
from bot.web.query import MAX_TEXT_CHARS
from bot.web.security import session_of
from partners.catalog import PartnerCatalog
from partners.persona import Partner

_NO_BIDI = dict.fromkeys(map(ord, BIDI_CONTROLS))


def plain(value: object) -> str:
    """Text a user or a model wrote, for a page: bidi controls removed (the template escapes
    the rest and marks it ``dir=auto`` so right-to-left text stays in its box)."""
    return str(value).translate(_NO_BIDI)


def make_templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bot.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["plain"] = plain
    # a search field longer than a query takes would only get a 400
    env.globals["max_text"] = MAX_TEXT_CHARS
    return env


@dataclass
class WebParts:
    config: Config
    store: Store
    catalog: PartnerCatalog
    actions: OwnerActions
    templates: jinja2.Environment = field(default_factory=make_templates)
    notes: dict[str, list[str]] = field(default_factory=dict)
    """Per session: answers to show on the next page (after a change's redirect)."""

    def when(self, timestamp: float | None) -> str:
        if not timestamp:
            return "never"
        return f"{datetime.fromtimestamp(timestamp, self.config.owner_timezone()):%Y-%m-%d %H:%M}"

    def render(self, request: web.Request, template: str, **values: Any) -> web.Response:
        session = session_of(request)
        notes = self.notes.pop(session.session_hash, [])
        html = self.templates.get_template(template).render(
            csrf=session.csrf_token, notes=notes, when=self.when, path=request.path, **values
        )
        return web.Response(text=html, content_type="text/html")

    def text_page(self, text: str) -> web.Response:
        html = self.templates.get_template("text.html").render(text=text)
        return web.Response(text=html, content_type="text/html")

    def done(self, request: web.Request, note: str, to: str) -> web.HTTPSeeOther:
        """After a change: remember its answer for the next page and send the browser there
        (a reload then repeats nothing)."""
        self.notes.setdefault(session_of(request).session_hash, []).append(note)
        return web.HTTPSeeOther(to)

    def partner(self, partner_id: str) -> Partner:
        found = self.catalog.get(partner_id)
        if found is None:
            raise web.HTTPNotFound(text=f"There is no partner {partner_id!r}.")
        return found


async def form(request: web.Request) -> dict[str, str]:
    """A posted form's text fields (files are read where a page takes one)."""
    data = await request.post()
    return {key: value for key, value in data.items() if isinstance(value, str)}
