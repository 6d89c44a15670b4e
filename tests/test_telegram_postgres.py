"""A gateway on PostgreSQL end to end: ``[storage] database_url`` set, the real
python-telegram-bot against the fake Bot API and the fake LLM. A turn is stored, answered and
delivered through the PostgreSQL store, nothing goes to SQLite, and a restart carries on from
what the database holds."""

from __future__ import annotations

import asyncpg

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

ALICE = 501


async def stored_rows(url: str) -> list[tuple[str, str, str]]:
    db = await asyncpg.connect(url)
    try:
        rows = await db.fetch("SELECT role, text, status FROM messages ORDER BY id")
    finally:
        await db.close()
    return [(row["role"], row["text"], row["status"]) for row in rows]


async def test_a_turn_runs_on_postgresql(
    # the database first: it is dropped only after the gateway stopped (a stopping worker
    # gives its leases back in it)
    postgres_database: str,
    gateways: TelegramGateways,
    fake: FakeTelegram,
    fake_llm: FakeLLM,
) -> None:
    storage = {"database_url": postgres_database}
    gateway = await gateways.start(storage=storage)
    fake_llm.script(Reply(text="Hello Alice, tea sounds lovely"))
    fake.send_user_message(chat_id=ALICE, text="shall we have green tea?", first_name="Alice")
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.text == "Hello Alice, tea sounds lovely"
    await settled(fake, gateway)
    rows = await stored_rows(postgres_database)
    assert ("user", "shall we have green tea?", "done") in rows
    assert ("assistant", "Hello Alice, tea sounds lovely", "delivered") in rows
    assert not (gateways.data_dir / "gateway.db").exists()
    hits = await gateway.app.store.search("example", "green tea", None, 10)
    assert {hit.text for hit in hits} == {
        "shall we have green tea?",
        "Hello Alice, tea sounds lovely",
    }

    await gateways.stop_all()
    await gateways.start(storage=storage)
    fake_llm.script(Reply(text="Yes, green tea again"))
    fake.send_user_message(chat_id=ALICE, text="same tea as before?", first_name="Alice")
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    # the history the model saw came back from the database after the restart
    assert "shall we have green tea?" in str(fake_llm.requests[-1]["messages"])
