"""Journals: a year's calendar per partner (days with a journal are links), one day's
entries with the nightly summary of the day — read from the files ``/admin journal`` reads,
chat markers hidden as they are there, the Markdown shown formatted (``journal_html``)."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime

from aiohttp import web

from bot.admin.memory import CHAT_MARKER
from bot.web import query
from bot.web.journal_html import journal_html
from bot.web.pages import WebParts
from partners.journal import DAY_LINE, journal_file, journal_files
from partners.persona import Partner

MAX_YEAR = 9999
"""The last year a date can have (and a journal file be named after)."""


@dataclass(frozen=True)
class Month:
    name: str
    weeks: list[list[int]]
    """Days of the month by week, Monday first; 0 pads the first and last week."""
    days: set[int]
    """Days with a journal."""
    prefix: str
    """``YYYY-MM-`` for links."""


def routes(parts: WebParts) -> list[web.RouteDef]:
    async def index(request: web.Request) -> web.Response:
        partners = parts.catalog.all()
        if partners:
            raise web.HTTPSeeOther(f"/journals/{partners[0].id}")
        return parts.render(request, "journals.html", partner=None, partners=[], year=0, months=[])

    async def year(request: web.Request) -> web.Response:
        partner = parts.partner(request.match_info["id"])
        shown = query.number(request, "year", MAX_YEAR) or _this_year(partner, parts)
        days = await _journal_days(parts, partner)
        return parts.render(
            request,
            "journals.html",
            partner=partner,
            partners=parts.catalog.all(),
            year=shown,
            months=calendar_of(shown, days),
        )

    async def day(request: web.Request) -> web.Response:
        partner = parts.partner(request.match_info["id"])
        wanted = request.match_info["day"]
        if not is_day(wanted):
            raise web.HTTPNotFound(text=f"{wanted!r} is not a date (YYYY-MM-DD).")
        text = await parts.actions.admin.memory.read(journal_file(partner, wanted))
        summary, body = split_day(text)
        return parts.render(
            request,
            "journal_day.html",
            partner=partner,
            day=wanted,
            summary=summary,
            body=journal_html(body) if body else None,
        )

    return [
        web.get("/journals", index),
        web.get("/journals/{id}", year),
        web.get("/journals/{id}/{day}", day),
    ]


def is_day(text: str) -> bool:
    """A date written YYYY-MM-DD, as journal files are named (``fromisoformat`` also takes
    20260310 and 2026-W10-1)."""
    try:
        return date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False


def _this_year(partner: Partner, parts: WebParts) -> int:
    return datetime.now(partner.timezone(parts.config.owner_timezone())).year


async def _journal_days(parts: WebParts, partner: Partner) -> set[str]:
    files = await journal_files(parts.actions.admin.memory, partner.dir)
    return {f.name.removeprefix("memory/").removesuffix(".md") for f in files}


def calendar_of(year: int, days: set[str]) -> list[Month]:
    months = []
    for number in range(1, 13):
        prefix = f"{year:04d}-{number:02d}-"
        with_journal = {int(d[len(prefix) :]) for d in days if d.startswith(prefix)}
        weeks = calendar.Calendar().monthdayscalendar(year, number)
        months.append(Month(calendar.month_name[number], weeks, with_journal, prefix))
    return months


def split_day(text: str) -> tuple[str, str]:
    """(the nightly summary of the day, the entries) with chat markers removed."""
    summary, lines = "", []
    for line in CHAT_MARKER.sub("", text).splitlines():
        if line.startswith(DAY_LINE) and not summary:
            summary = line.removeprefix(DAY_LINE).strip()
        else:
            lines.append(line)
    return summary, "\n".join(lines).strip()
