"""Owner commands about the running gateway: status, usage and cost, settings and backups."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import date, datetime, timedelta

from bot.admin.args import MAX_SEND_BYTES, AdminError, file_reply, need, services
from bot.admin.mcp_status import mcp_lines
from bot.commands.paging import paged, pop_page
from bot.commands.types import CommandContext, CommandReply
from bot.config.memory_settings import SETTABLE
from bot.gateway.memory_documents import loaded_catalogs
from bot.store import StoreError, UsageRow
from bot.store.backup import write_backup
from bot.text.literal import literal_line
from bot.turn.sessions import OWNER_AUDIENCE
from partners.catalog import catalog_line

HOUR_SECONDS = 3600.0
DEFAULT_USAGE_DAYS = 7
MAX_USAGE_DAYS = 366
TOKENS_PER_PRICE_UNIT = 1_000_000
USAGE_KINDS = ("chat", "scene", "gate", "review", "consult", "checkin", "image")
MEDIA_UNITS = {"transcription": "s heard", "speech": "characters spoken", "image": "images"}
"""Usage that is not tokens (bot/turn/media.py, bot/turn/voice_replies.py), with its unit."""


def _ago(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} days"


async def _worker_lines(ctx: CommandContext, now: float) -> list[str]:
    """The workers on this database, the leader and its epoch, and each one's leases and
    (partners in the database) the partner catalog it has loaded: a worker behind shows."""
    leader = await ctx.store.leader()
    leads = (
        f"leader {literal_line(leader.worker_id)}, epoch {leader.epoch}"
        if leader is not None and leader.expires_at > now
        else "no leader right now"
    )
    workers = await ctx.store.workers()
    catalogs = await loaded_catalogs(ctx.store) if ctx.catalog.rows is not None else {}
    lines = [f"Workers: {len(workers)} ({leads})"]
    for worker in workers:
        loaded = catalogs.get(worker.worker_id)
        lines.append(
            f"  {literal_line(worker.worker_id)} on {literal_line(worker.host)}: heartbeat "
            f"{max(0, int(now - worker.heartbeat_at))} s ago, {worker.leases} chat(s) leased"
            + (f", partners: {catalog_line(*loaded)}" if loaded else "")
            + ("; holds no liveness lock (gone, or reconnecting)" if worker.alive is False else "")
        )
    return lines


async def admin_status(ctx: CommandContext) -> CommandReply:
    tools = services(ctx)
    now = time.time()
    zone = ctx.config.owner_timezone()
    channels = ", ".join(
        f"{name} {'connected' if channel.connected else 'DISCONNECTED'}"
        for name, channel in tools.channels.items()
    )
    replies = await ctx.store.reply_counts(now - HOUR_SECONDS)
    lines = [
        f"Up {_ago(now - tools.started_at)}",
        f"Channels: {channels or 'none'}",
        f"Queue: {await ctx.store.pending_count()} message(s) waiting, "
        f"{tools.dispatcher.active} chat(s) being answered",
        f"Last hour: {sum(replies.values())} turns, {replies.get('notice', 0)} errors "
        f"({tools.dispatcher.turns_failed} crashed turns since start)",
        f"Partners here: {ctx.catalog.describe()}",
    ]
    lines += await _worker_lines(ctx, now)
    reviews = await ctx.store.last_reviews()
    lines.append("Last review:")
    for partner in ctx.catalog.all():
        last = reviews.get(partner.id)
        when = f"{_ago(now - last)} ago" if last else "never"
        lines.append(f"  {partner.name}: {when}")
    runs = tools.next_runs()
    lines.append("Next jobs:" if runs else "Next jobs: none (the scheduler is off)")
    for job, at in sorted(runs.items()):
        lines.append(
            f"  {job}: {at.astimezone(zone):%Y-%m-%d %H:%M} " if at else f"  {job}: paused"
        )
    lines.append(await _recall_line(ctx))
    lines += mcp_lines(tools.mcp)
    lines += await _cost_lines(ctx)
    return CommandReply("\n".join(line.rstrip() for line in lines))


async def _recall_line(ctx: CommandContext) -> str:
    """Whether search is semantic too, and how many messages still wait for their vector."""
    model = ctx.config.embeddings.vector_model
    if not ctx.config.embeddings.enabled or model is None:
        return "Recall: lexical (no [embeddings] endpoint set)"
    waiting = await ctx.store.embedding_backlog(model)
    return f"Recall: lexical + embeddings ({model}), {waiting} message(s) waiting for a vector"


async def _cost_lines(ctx: CommandContext) -> list[str]:
    budget = services(ctx).budget
    tokens = await budget.tokens_today()
    lines = ["Budgets today:"]
    for partner in ctx.catalog.all():
        limit = partner.preset.daily_token_budget
        if limit is None:
            continue
        used = tokens.get(partner.id, 0)
        state = "RESTING (budget used up)" if used >= limit else "ok"
        lines.append(f"  {partner.name}: {used} of {limit} tokens — {state}")
    if len(lines) == 1:
        lines[0] = "Budgets today: none set (preset.yml daily_token_budget)"
    per_hour = ctx.config.access.user_messages_per_hour
    if per_hour:
        limited = await budget.rate_limited_users()
        who = ", ".join(s.replace("|", " for ") for s in limited) or "nobody"
        lines.append(f"Rate limit {per_hour} messages/hour; resting in the last hour: {who}")
    return lines


async def admin_usage(ctx: CommandContext) -> CommandReply:
    page = pop_page(ctx.args)
    days = DEFAULT_USAGE_DAYS
    if ctx.args:
        if not ctx.args[0].isdigit() or not 1 <= int(ctx.args[0]) <= MAX_USAGE_DAYS:
            raise AdminError(f"usage takes a number of days from 1 to {MAX_USAGE_DAYS}")
        days = int(ctx.args[0])
    today = datetime.now(ctx.config.owner_timezone()).date()
    since = (today - timedelta(days=days - 1)).isoformat()
    rows = await ctx.store.usage(since)
    if not rows:
        return CommandReply(f"No model usage in the last {days} day(s).")
    prices = (ctx.config.llm.price_prompt_per_million, ctx.config.llm.price_completion_per_million)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    daily: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        who = "assistant" if row["partner_id"] == OWNER_AUDIENCE else row["partner_id"]
        for bucket in (totals[who], daily[(row["day"], who, row["kind"])]):
            bucket[0] += row["prompt_tokens"]
            bucket[1] += row["completion_tokens"]
    lines = [
        f"Usage over the last {days} day(s) (prompt + completion tokens{_price_note(prices)}):"
    ]
    for who, (prompt, completion) in sorted(totals.items()):
        lines.append(f"  {who}: {prompt} + {completion}{_cost(prices, prompt, completion)}")
    lines.append("Per day and kind (" + ", ".join(USAGE_KINDS) + "):")
    for (day, who, kind), (prompt, completion) in sorted(daily.items()):
        if prompt or completion or kind not in MEDIA_UNITS:
            lines.append(
                f"  {day} {who} {kind}: {prompt} + {completion}{_cost(prices, prompt, completion)}"
            )
    lines += _media_lines(ctx, rows)
    lines += await _tool_call_lines(ctx, today - timedelta(days=days - 1))
    return paged("\n".join(lines), f"/admin usage {days}", page)


async def _tool_call_lines(ctx: CommandContext, first: date) -> list[str]:
    """MCP tool calls per server since the first day shown (its midnight, the owner's time)."""
    since = datetime.combine(first, datetime.min.time(), ctx.config.owner_timezone())
    counts = await ctx.store.tool_call_counts(since.timestamp())
    if not counts:
        return []
    return ["MCP tool calls: " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))]


def _media_lines(ctx: CommandContext, rows: list[UsageRow]) -> list[str]:
    """Seconds transcribed, characters spoken and images seen, per day and partner."""
    units: dict[tuple[str, str, str], float] = defaultdict(float)
    for row in rows:
        if row.get("units") and row["kind"] in MEDIA_UNITS:
            who = "assistant" if row["partner_id"] == OWNER_AUDIENCE else row["partner_id"]
            units[(row["day"], who, row["kind"])] += row["units"]
    if not units:
        return []
    speech, llm = ctx.config.speech, ctx.config.llm
    price = {
        "transcription": speech.price_per_minute / 60,
        "speech": speech.price_per_million_chars / TOKENS_PER_PRICE_UNIT,
        "image": llm.price_per_image,
    }
    lines = ["Voice and images (set prices in [speech] and llm.price_per_image):"]
    for (day, who, kind), amount in sorted(units.items()):
        cost = f" ≈ {amount * price[kind]:.4f}" if price[kind] else ""
        lines.append(f"  {day} {who} {kind}: {amount:g} {MEDIA_UNITS[kind]}{cost}")
    return lines


def _price_note(prices: tuple[float, float]) -> str:
    if not any(prices):
        return "; cost unknown: set llm.price_prompt_per_million and price_completion_per_million"
    return f"; cost at {prices[0]} / {prices[1]} per million"


def _cost(prices: tuple[float, float], prompt: int, completion: int) -> str:
    if not any(prices):
        return ""
    cost = (prompt * prices[0] + completion * prices[1]) / TOKENS_PER_PRICE_UNIT
    return f" ≈ {cost:.4f}"


async def admin_settings(ctx: CommandContext) -> CommandReply:
    settings = services(ctx).settings
    if not ctx.args:
        effective = settings.memory()
        lines = ["Memory settings (set: /admin settings <key> <value>, or <key> default):"]
        for key, meaning in SETTABLE.items():
            value = getattr(effective, key)
            shown = str(value).lower() if isinstance(value, bool) else value
            lines.append(f"  {key} = {shown} ({settings.source(key)}) — {meaning}")
        return CommandReply("\n".join(lines))
    need(ctx, 2, "settings <key> <value>")
    change = await settings.set(ctx.args[0].lower(), " ".join(ctx.args[1:]))
    shown = str(change.value).lower() if isinstance(change.value, bool) else change.value
    when = SETTABLE[change.key].rsplit("(", 1)[-1].rstrip(")")
    if change.fell_back:
        return CommandReply(
            f"{change.key} = {' '.join(ctx.args[1:])!r} is not a positive number; "
            f"using the default {shown}."
        )
    return CommandReply(f"{change.key} = {shown} (applies: {when}).")


async def admin_backup(ctx: CommandContext) -> CommandReply:
    try:
        target = await write_backup(ctx.config.data_dir, store=ctx.store)
    except StoreError as exc:  # on PostgreSQL: pg_dump is the way
        return CommandReply(f"No backup written: {exc}.")
    size = (await asyncio.to_thread(target.stat)).st_size
    if size > MAX_SEND_BYTES:
        megabytes = size / (1024 * 1024)
        return CommandReply(f"Backup written to {target} ({megabytes:.1f} MB, too big to send).")
    data = await asyncio.to_thread(target.read_bytes)
    return file_reply(f"Backup of the data directory, also kept at {target}", target.name, data)
