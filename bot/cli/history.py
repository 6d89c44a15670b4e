"""``companion search`` and ``import``: past conversations from the terminal, searched, or
imported from another app's history
(:mod:`bot.cli.history_formats` reads the files). An import stores no
message its user had forgotten (``/forget history`` left a tombstone of each)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from bot.cli.data import CLIError, load_catalog, lock_data_dir
from bot.cli.history_formats import detect, read
from bot.cli.history_formats.messages import BadHistory, Choices, Imported, audience_of, user_of
from bot.config.model import Config
from bot.services.local_embeddings import embeddings_client
from bot.store import NewMessage, Store
from bot.store.opening import open_store
from partners.persona import Partner
from partners.recall import Recall
from partners.tombstones import unforgotten
from partners.tools import format_hit, hit_moment


def cmd_search(config: Config, args: argparse.Namespace) -> int:
    partner = load_catalog(config).require(args.partner)
    if not 1 <= args.limit <= 100:
        raise CLIError("--limit must be between 1 and 100")
    audiences = None if args.user is None else [f"user:{args.user}"]

    async def go() -> None:
        embeddings = (  # may refuse (a missing extra): before the store is opened
            embeddings_client(config.embeddings, config.llm) if config.embeddings.enabled else None
        )
        store = await open_store(config.database)
        recall = Recall.configured(store, embeddings, config.embeddings)
        try:
            queries = [args.query] if args.query is not None else None
            if queries is None:
                for line in sys.stdin:
                    if line.strip():
                        hits = await recall.search(partner.id, line.strip(), audiences, args.limit)
                        print(
                            json.dumps(
                                {"query": line.strip(), "results": _hits_json(hits)},
                                ensure_ascii=False,
                            ),
                            flush=True,
                        )
                return
            hits = await recall.search(partner.id, args.query, audiences, args.limit)
            if args.json:
                print(
                    json.dumps(
                        {"query": args.query, "results": _hits_json(hits)}, ensure_ascii=False
                    )
                )
            else:
                language = partner.preset.language
                print("\n".join(format_hit(h, args.query, language) for h in hits) or "no matches")
        finally:
            if embeddings is not None:
                await embeddings.close()
            await store.close()

    asyncio.run(go())
    return 0


def _hits_json(hits: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": hit.platform_message_id,
            "session": hit.session_title,
            "role": hit.role,
            "time": _iso(hit_moment(hit.created_at)),
            "text": hit.text,
        }
        for hit in hits
    ]


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


IMPORT_BATCH = 2000
"""Messages stored in one trip: a large history streams through in batches this size."""


def cmd_import(config: Config, args: argparse.Namespace) -> int:
    partner = load_catalog(config).require(args.partner)
    path = Path(args.file)
    if not path.is_file():
        raise CLIError(f"{path}: no such file")
    choices = Choices(as_user=args.as_user, chat=args.chat)
    try:
        format = args.format or detect(path)
    except BadHistory as exc:
        raise CLIError(str(exc)) from None
    lock = lock_data_dir(config)
    counts = [0, 0, 0]
    try:
        asyncio.run(_import(config, partner, read(path, format, choices), counts))
    except BadHistory as exc:
        stored = f"; {counts[0]} messages before it were imported" if counts[0] else ""
        raise CLIError(f"{exc}{stored} (fix it and import again: nothing is added twice)") from None
    finally:
        lock.release()
    added, skipped, forgotten = counts
    left_out = f", {forgotten} forgotten on request and left out" if forgotten else ""
    print(f"imported {added} messages into {partner.id} ({skipped} already there{left_out})")
    return 0


async def _import(
    config: Config, partner: Partner, history: Iterable[Imported], counts: list[int]
) -> None:
    """Store the history's messages in batches, counting in ``counts`` how many were added,
    already there, and left out because their user had forgotten them
    (:func:`partners.tombstones.unforgotten`)."""
    store = await open_store(config.database)
    try:
        # imported messages are stemmed in the partner's language, as the gateway would
        await store.set_search_language(partner.id, partner.preset.language)
        sessions: dict[str, str] = {}
        items = iter(history)
        batch = await asyncio.to_thread(_next_batch, items)
        while batch:
            # the next batch is read (the file parsed, on a thread of its own) while this one
            # is stored (the database works on its thread, mostly without the GIL)
            storing = asyncio.create_task(_import_batch(store, partner.id, batch, sessions))
            try:
                batch = await asyncio.to_thread(_next_batch, items)
            finally:  # a bad message in the next batch: this one is stored and counted first
                for at, count in enumerate(await storing):
                    counts[at] += count
    finally:
        await store.close()


async def _import_batch(
    store: Store, partner_id: str, batch: list[Imported], sessions: dict[str, str]
) -> tuple[int, int, int]:
    read = [(item, _imported(partner_id, item)) for item in batch]
    kept = {id(m) for m in await unforgotten(store, [message for _, message in read])}
    messages = []
    for item, message in read:
        if id(message) not in kept:
            continue  # not even as a session's title
        if message.chat_key not in sessions:
            sessions[message.chat_key] = await _import_session(
                store, partner_id, message.chat_key, item
            )
        messages.append(replace(message, session_id=sessions[message.chat_key]))
    ids = await store.add_messages(messages)
    added = sum(1 for i in ids if i is not None)
    return added, len(ids) - added, len(read) - len(messages)


def _imported(partner_id: str, item: Imported) -> NewMessage:
    """The message one imported message becomes, without its session."""
    user_key = user_of(item.user)
    is_user = item.role == "user"
    return NewMessage(
        chat_key=f"import:{partner_id}:{item.conversation}",
        role=item.role,
        text=item.text,
        audience=audience_of(item.user),
        dedup_key=f"import:{partner_id}:{item.ident}",
        partner_id=partner_id,
        platform_message_id=item.ident,
        user_key=user_key if is_user else None,
        speaker=item.user if is_user else partner_id,
        created_at=item.time,
    )


async def _import_session(store: Store, partner_id: str, chat_key: str, item: Imported) -> str:
    """The session an imported conversation goes into: the one an earlier import of the same
    file made, or a new, ended one titled by its first message."""
    earlier = await store.latest_session(chat_key, partner_id, kind="import")
    if earlier is not None:
        return earlier.id
    user_key = user_of(item.user)
    session = await store.create_session(
        partner_id=partner_id,
        chat_key=chat_key,
        user_key=user_key,
        audience=audience_of(item.user),
        system_prompt="",
        kind="import",
        title=(item.title or item.text)[:60],
    )
    await store.end_session(session.id, "imported")
    return session.id


def _next_batch(items: Iterator[Imported]) -> list[Imported]:
    return list(islice(items, IMPORT_BATCH))
