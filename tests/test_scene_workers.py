"""A scene's turns on several workers: its one queue key holds every partner's messages, so
two workers answer each partner's message once, one turn at a time, in the order they came."""

from __future__ import annotations

import asyncio

from bot.store import NewMessage
from bot.workers.queue_keys import scene_key
from tests.test_workers import Cluster, until
from tests.test_workers import cluster as cluster  # noqa: F401 (the fixture)

PARTNERS = ("mira", "sol", "kai")


async def test_two_workers_answer_each_scene_partner_once_and_in_order(cluster: Cluster) -> None:
    chats = [f"test:{n}" for n in range(20)]
    for chat_key in chats:
        await cluster.store.upsert_chat(chat_key, "test", chat_key[5:], None, "group", None)
        for partner in (*PARTNERS, "mira"):  # mira, then the others, then mira again
            await cluster.store.add_message(
                NewMessage(
                    chat_key, "user", f"{partner} {len(PARTNERS)}", "g", "pending",
                    dedup_key=f"{chat_key}/{partner}/{await cluster.store.pending_count()}",
                    queue_key=scene_key(chat_key), partner_id=partner,
                )
            )  # fmt: skip
    one, two = cluster.node("one"), cluster.node("two")
    await asyncio.gather(cluster.start(one), cluster.start(two))
    turns = len(chats) * 4
    await until(
        lambda: len(one.turns.answered) + len(two.turns.answered) >= turns, "every turn answered"
    )
    await one.dispatcher.idle()
    await two.dispatcher.idle()
    assert one.turns.overlaps == two.turns.overlaps == 0
    assert len(cluster.channel.sent) == turns  # once each: a turn per partner's message
    for chat_key in chats:
        said = [m.text for m in cluster.channel.sent if m.chat.chat_id == chat_key[5:]]
        assert said == ["re mira 3", "re sol 3", "re kai 3", "re mira 3"], chat_key
    assert await cluster.store.pending_count() == 0
