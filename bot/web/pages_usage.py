"""Usage: tokens and estimated cost per day, per partner and per kind (chat, scene, gate,
review, consult, check-in, voice, images), as server-drawn SVG charts with the numbers in a
table beside them. The rows are the ones ``/admin usage`` reads; prices come from config.toml."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from bot.admin.status import (
    DEFAULT_USAGE_DAYS,
    MAX_USAGE_DAYS,
    MEDIA_UNITS,
    TOKENS_PER_PRICE_UNIT,
)
from bot.config.model import Config
from bot.turn.sessions import OWNER_AUDIENCE
from bot.web import query
from bot.web.charts import color_of, stacked_bars
from bot.web.pages import WebParts


def routes(parts: WebParts) -> list[web.RouteDef]:
    async def usage(request: web.Request) -> web.Response:
        days = query.number(request, "days", MAX_USAGE_DAYS) or max(DEFAULT_USAGE_DAYS, 30)
        today = datetime.now(parts.config.owner_timezone()).date()
        calendar = [(today - timedelta(days=days - 1 - i)).isoformat() for i in range(days)]
        rows = await parts.store.usage(calendar[0])
        by_partner = _series(rows, calendar, "partner_id")
        by_kind = _series(rows, calendar, "kind")
        cost = _cost_per_day(parts.config, rows, calendar)
        return parts.render(
            request,
            "usage.html",
            days=days,
            calendar=calendar,
            partner_chart=stacked_bars(calendar, by_partner, "tokens"),
            kind_chart=stacked_bars(calendar, by_kind, "tokens"),
            cost_chart=stacked_bars(calendar, {"estimated cost": cost}, "", "{:,.4f}")
            if any(cost)
            else None,
            legend_partner=[(name, color_of(i)) for i, name in enumerate(by_partner)],
            legend_kind=[(name, color_of(i)) for i, name in enumerate(by_kind)],
            totals={name: sum(values) for name, values in by_partner.items()},
            media=_media_totals(rows),
            total_cost=sum(cost),
            priced=_priced(parts.config),
        )

    return [web.get("/usage", usage)]


def _who(partner_id: str) -> str:
    return "assistant" if partner_id == OWNER_AUDIENCE else partner_id


def _series(
    rows: Sequence[Mapping[str, Any]], calendar: list[str], column: str
) -> dict[str, list[float]]:
    index = {day: i for i, day in enumerate(calendar)}
    series: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(calendar))
    for row in rows:
        tokens = row["prompt_tokens"] + row["completion_tokens"]
        if tokens and row["day"] in index:
            name = _who(row[column]) if column == "partner_id" else row[column]
            series[name][index[row["day"]]] += tokens
    return dict(sorted(series.items()))


def _media_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Voice and images over the period, in their own units (seconds heard, characters
    spoken, images seen)."""
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        if row["kind"] in MEDIA_UNITS and row.get("units"):
            totals[row["kind"]] += row["units"]
    return {kind: f"{amount:g} {MEDIA_UNITS[kind]}" for kind, amount in sorted(totals.items())}


def _priced(config: Config) -> bool:
    return bool(config.llm.price_prompt_per_million or config.llm.price_completion_per_million)


def _cost_per_day(
    config: Config, rows: Sequence[Mapping[str, Any]], calendar: list[str]
) -> list[float]:
    """Estimated cost per day at the configured prices (0 where none are set)."""
    llm, speech = config.llm, config.speech
    per_unit = {
        "transcription": speech.price_per_minute / 60,
        "speech": speech.price_per_million_chars / TOKENS_PER_PRICE_UNIT,
        "image": llm.price_per_image,
    }
    index = {day: i for i, day in enumerate(calendar)}
    cost = [0.0] * len(calendar)
    for row in rows:
        if row["day"] not in index:
            continue
        tokens = (
            row["prompt_tokens"] * llm.price_prompt_per_million
            + row["completion_tokens"] * llm.price_completion_per_million
        ) / TOKENS_PER_PRICE_UNIT
        units = (row.get("units") or 0) * per_unit.get(row["kind"], 0.0)
        cost[index[row["day"]]] += tokens + units
    return cost
