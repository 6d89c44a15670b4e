"""``companion search``, ``reindex`` and ``import``: past conversations from the terminal,
searched, embedded for semantic recall, or imported from a JSONL file. An import stores no
message its user had forgotten (``/forget history`` left a tombstone of each)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.cli.data import CLIError, load_catalog, lock_data_dir
from bot.config.model import Config
from bot.services.embeddings import EmbeddingsClient, EmbeddingsUnavailable
from bot.store import NewMessage, Store
from bot.store.opening import open_store
from bot.workers.embedder import reindex
from partners.persona import Partner
from partners.recall import Recall
from partners.tombstones import unforgotten
from partners.tools import format_hit


def cmd_search(config: Config, args: argparse.Namespace) -> int:
    partner = load_catalog(config).require(args.partner)
    if not 1 <= args.limit <= 100:
        raise CLIError("--limit must be between 1 and 100")
    audiences = None if args.user is None else [f"user:{args.user}"]

    async def go() -> None:
        store = await open_store(config.database)
        embeddings = (
            EmbeddingsClient(config.embeddings, config.llm) if config.embeddings.enabled else None
        )
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


def cmd_reindex(config: Config, args: argparse.Namespace) -> int:
    if not config.embeddings.enabled:
        raise CLIError(
            "semantic recall is off: set [embeddings] base_url and model in config.toml first "
            '(docs/search.md, "Semantic recall")'
        )
    partner_id = load_catalog(config).require(args.partner).id if args.partner else None
    lock = lock_data_dir(config)
    try:
        embedded = asyncio.run(_reindex(config, partner_id))
    finally:
        lock.release()
    print(f"embedded {embedded} messages with {config.embeddings.model}")
    return 0


async def _reindex(config: Config, partner_id: str | None) -> int:
    store = await open_store(config.database)
    client = EmbeddingsClient(config.embeddings, config.llm)
    try:
        return await reindex(
            store,
            client,
            partner_id,
            config.embeddings.batch_size,
            progress=lambda done: print(f"  {done} embedded", flush=True),
        )
    except EmbeddingsUnavailable as exc:
        raise CLIError(f"{exc}; what was embedded so far is kept, run reindex again") from exc
    finally:
        await client.close()
        await store.close()


def _hits_json(hits: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": hit.platform_message_id,
            "session": hit.session_title,
            "role": hit.role,
            "time": datetime.fromtimestamp(hit.created_at, UTC).isoformat(),
            "text": hit.text,
        }
        for hit in hits
    ]


IMPORT_ROLES = ("user", "assistant")


def parse_import_line(number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CLIError(f"line {number}: not JSON ({exc.msg})") from exc
    if not isinstance(record, dict):
        raise CLIError(f"line {number}: expected a JSON object")
    for key in ("session", "user", "role", "text", "time"):
        if key not in record or record[key] in (None, ""):
            raise CLIError(f"line {number}: missing '{key}'")
    if record["role"] not in IMPORT_ROLES:
        raise CLIError(f"line {number}: role must be user or assistant, not {record['role']!r}")
    record["time"] = _parse_time(number, record["time"])
    return record


def _parse_time(number: int, value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise CLIError(f"line {number}: time {value!r} is not ISO 8601 or epoch seconds") from exc
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def cmd_import(config: Config, args: argparse.Namespace) -> int:
    partner = load_catalog(config).require(args.partner)
    path = Path(args.file)
    if not path.is_file():
        raise CLIError(f"{path}: no such file")
    records = [
        parse_import_line(number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.strip()
    ]
    lock = lock_data_dir(config)
    try:
        added, skipped, forgotten = asyncio.run(_import(config, partner, records))
    finally:
        lock.release()
    left_out = f", {forgotten} forgotten on request and left out" if forgotten else ""
    print(f"imported {added} messages into {partner.id} ({skipped} already there{left_out})")
    return 0


async def _import(
    config: Config, partner: Partner, records: list[dict[str, Any]]
) -> tuple[int, int, int]:
    """Store the records' messages; how many were added, already there, and left out
    because their user had forgotten them (:func:`partners.tombstones.unforgotten`)."""
    store = await open_store(config.database)
    try:
        # imported messages are stemmed in the partner's language, as the gateway would
        await store.set_search_language(partner.id, partner.preset.language)
        read = [(r, _imported(partner.id, n, r)) for n, r in enumerate(records)]
        kept = {id(m) for m in await unforgotten(store, [message for _, message in read])}
        sessions: dict[str, str] = {}
        messages = []
        for record, message in read:
            if id(message) not in kept:
                continue  # not even as a session's title
            if message.chat_key not in sessions:
                sessions[message.chat_key] = await _import_session(
                    store, partner.id, message.chat_key, record
                )
            messages.append(replace(message, session_id=sessions[message.chat_key]))
        ids = await store.add_messages(messages)
    finally:
        await store.close()
    added = sum(1 for i in ids if i is not None)
    return added, len(ids) - added, len(read) - len(messages)


def _imported(partner_id: str, number: int, record: dict[str, Any]) -> NewMessage:
    """The message one record (the ``number``-th of its file) becomes, without its session."""
    user = str(record["user"])
    user_key = user if ":" in user else f"import:{user}"
    ident = str(record.get("id") or f"{record['session']}:{number}")
    is_user = record["role"] == "user"
    return NewMessage(
        chat_key=f"import:{partner_id}:{record['session']}",
        role=record["role"],
        text=str(record["text"]),
        audience=f"user:{user_key}",
        dedup_key=f"import:{partner_id}:{ident}",
        partner_id=partner_id,
        platform_message_id=ident,
        user_key=user_key if is_user else None,
        speaker=user if is_user else partner_id,
        created_at=record["time"],
    )


async def _import_session(
    store: Store, partner_id: str, chat_key: str, record: dict[str, Any]
) -> str:
    """The session an imported conversation goes into: the one an earlier import of the same
    file made, or a new, ended one titled by its first record."""
    earlier = await store.latest_session(chat_key, partner_id, kind="import")
    if earlier is not None:
        return earlier.id
    user = str(record["user"])
    user_key = user if ":" in user else f"import:{user}"
    session = await store.create_session(
        partner_id=partner_id,
        chat_key=chat_key,
        user_key=user_key,
        audience=f"user:{user_key}",
        system_prompt="",
        kind="import",
        title=str(record.get("title") or record["text"])[:60],
    )
    await store.end_session(session.id, "imported")
    return session.id
