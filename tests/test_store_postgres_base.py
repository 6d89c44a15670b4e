"""The ground the PostgreSQL store's concerns stand on (bot/store/postgres/base.py), and the
concerns built on it so far, held to the same contract on both backends until the PostgreSQL
store is whole and joins STORE_BACKENDS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.store import ChatRow, NewMessage, Store, StoreUnavailable
from bot.store.postgres.audit import Audit
from bot.store.postgres.chats import Chats
from bot.store.postgres.checkins import Checkins
from bot.store.postgres.connection import create_pool
from bot.store.postgres.migrations import migrate
from bot.store.postgres.review import ReviewState
from bot.store.postgres.usage import Usage
from bot.store.postgres.users import Users
from tests.postgres_server import PostgresServer


async def no_recompute(method: str) -> None:
    raise AssertionError(f"no PostgreSQL step recomputes rows yet, but {method} was called")


@pytest.fixture
async def pool(postgres_database: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(postgres_database)
    async with pool.acquire() as db:
        await migrate(db, no_recompute)
    yield pool
    await pool.close()


class PostgresConcerns(Audit, Chats, Checkins, ReviewState, Usage, Users):
    """The concerns the PostgreSQL store has so far."""


Concerns = Store | PostgresConcerns


@pytest.fixture(params=("sqlite", "postgres"))
async def both(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Concerns]:
    """The whole SQLite store, or the PostgreSQL concerns built so far."""
    if request.param == "sqlite":
        store = await Store.open(tmp_path / "db.sqlite")
        yield store
        await store.close()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    database = await server.create_database()
    pool = await create_pool(server.url(database))
    async with pool.acquire() as db:
        await migrate(db, no_recompute)
    yield PostgresConcerns(pool)
    await pool.close()
    await server.drop_database(database)


async def test_audit_rows_come_newest_first_and_filter_by_action(both: Concerns) -> None:
    await both.audit("owner", "bind", chat="g1")
    await both.audit("user:2", "pairing", code="ABC", nested={"n": 1})
    await both.audit("owner", "bind", chat="g2")
    rows = await both.audit_rows()
    assert [(r["actor"], r["action"], r["detail"]) for r in rows] == [
        ("owner", "bind", {"chat": "g2"}),
        ("user:2", "pairing", {"code": "ABC", "nested": {"n": 1}}),
        ("owner", "bind", {"chat": "g1"}),
    ]
    assert [r["detail"]["chat"] for r in await both.audit_rows("bind", limit=1)] == ["g2"]


async def test_a_setting_is_put_replaced_and_deleted(both: Concerns) -> None:
    await both.put_setting("memory.review_turns", "3")
    await both.put_setting("memory.review_turns", "5")
    await both.put_setting("owner.timezone", "Asia/Tokyo")
    assert await both.settings() == {
        "memory.review_turns": "5",
        "owner.timezone": "Asia/Tokyo",
    }
    assert await both.delete_setting("memory.review_turns") is True
    assert await both.delete_setting("memory.review_turns") is False
    assert await both.settings() == {"owner.timezone": "Asia/Tokyo"}


async def test_each_statement_counts_as_a_round_trip(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    before = store.round_trips
    await store.audit("owner", "x")
    await store.audit_rows()
    async with store._transaction() as tx:
        await tx.write("DELETE FROM audit")
    assert store.round_trips - before == 5  # two statements, then BEGIN, one, COMMIT


async def test_a_transaction_that_raises_leaves_nothing_behind(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    with pytest.raises(RuntimeError):
        async with store._transaction() as tx:
            await tx.write("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', 0)")
            raise RuntimeError("the turn broke")
    assert await store.settings() == {}


async def test_connections_lost_between_calls_cost_at_most_one_unavailable_call(
    pool: asyncpg.Pool, postgres_database: str
) -> None:
    store = PostgresConcerns(pool)
    await store.put_setting("kept", "yes")
    admin = await asyncpg.connect(postgres_database)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await admin.close()
    # whether the pool noticed the lost connection before handing it out is up to the race
    # with the server's goodbye; either way the caller sees the store's error, and the next
    # call gets a new connection
    try:
        first = await store.settings()
    except StoreUnavailable:
        first = await store.settings()
    assert first == {"kept": "yes"}
    assert await store.settings() == {"kept": "yes"}


async def test_a_connection_lost_in_a_transaction_is_store_unavailable(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    with pytest.raises(StoreUnavailable):
        async with store._transaction() as tx:
            await tx.write("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', 0)")
            await tx.one("SELECT pg_terminate_backend(pg_backend_pid())")
    assert await store.settings() == {}


async def test_a_mistake_in_our_sql_is_not_an_outage(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    with pytest.raises(asyncpg.UndefinedTableError):
        await store._all("SELECT * FROM no_such_table")


async def test_usage_adds_up_per_day_partner_kind_and_model(both: Concerns) -> None:
    await both.add_usage("2026-03-09", "mira", "chat", "m1", 100, 10)
    await both.add_usage("2026-03-09", "mira", "chat", "m1", 50, 5)
    await both.add_usage("2026-03-09", "mira", "review", "m1", 7, 3)
    await both.add_usage("2026-03-09", "kai", "chat", "m2", 1, 1)
    await both.add_usage("2026-03-08", "mira", "chat", "m1", 1000, 1000)
    await both.add_units("2026-03-09", "mira", "speech", "tts", 12.5)
    await both.add_units("2026-03-09", "mira", "speech", "tts", 0.25)
    assert await both.tokens_on("2026-03-09") == {"mira": 175, "kai": 2}
    assert await both.units_on("2026-03-09") == {"mira": {"speech": 12.75}}
    rows = await both.usage("2026-03-09")
    assert [(r["partner_id"], r["kind"], r["calls"], r["prompt_tokens"]) for r in rows] == [
        ("kai", "chat", 1, 1),
        ("mira", "chat", 2, 150),
        ("mira", "review", 1, 7),
        ("mira", "speech", 2, 0),
    ]


async def test_a_resting_notice_is_remembered_per_kind_and_subject(both: Concerns) -> None:
    assert await both.last_rest_notice("budget", "mira") is None
    await both.note_rest_notice("budget", "mira")
    first = await both.last_rest_notice("budget", "mira")
    await both.note_rest_notice("budget", "mira")
    await both.note_rest_notice("rate", "user:1")
    again = await both.last_rest_notice("budget", "mira")
    assert first is not None and again is not None and again >= first
    notices = await both.rest_notices_since(0)
    assert sorted((n["kind"], n["subject"]) for n in notices) == [
        ("budget", "mira"),
        ("rate", "user:1"),
    ]
    assert await both.rest_notices_since(again + 3600) == []


async def test_a_user_is_recorded_once_and_renamed_in_place(both: Concerns) -> None:
    await both.upsert_user("test:1", "test", "1", "Alice", "alice")
    await both.set_user_access("test:1", "allowed")
    await both.upsert_user("test:1", "test", "1", "Alice B.", None)
    await both.set_voice_mode("test:1", "always")
    await both.set_user_timezone("test:1", "Europe/Paris")
    user = await both.user("test:1")
    assert user is not None
    assert (user["display_name"], user["username"], user["access"], user["timezone"]) == (
        "Alice B.",
        None,
        "allowed",
        "Europe/Paris",
    )
    assert await both.voice_mode("test:1") == "always"
    assert await both.set_user_access("test:404", "allowed") is False
    assert await both.user("test:404") is None


async def test_pairings_live_until_closed_and_an_approval_is_told_once(both: Concerns) -> None:
    await both.create_pairing("AAA", "test:1", 3600)
    await both.create_pairing("BBB", "test:2", 3600)
    await both.create_pairing("OLD", "test:3", -1)
    assert [p["code"] for p in await both.live_pairings()] == ["AAA", "BBB"]
    assert [p["code"] for p in await both.live_pairings("test:2")] == ["BBB"]
    await both.close_pairing("AAA", "approved")
    assert [p["code"] for p in await both.live_pairings()] == ["BBB"]
    assert [p["code"] for p in await both.unannounced_approvals()] == ["AAA"]
    assert await both.take_announcement("AAA") is True
    assert await both.take_announcement("AAA") is False
    assert await both.take_announcement("BBB") is False
    assert await both.unannounced_approvals() == []
    pairing = await both.pairing("AAA")
    assert pairing is not None and pairing["status"] == "approved"


async def test_a_platform_is_claimed_once_and_its_other_codes_die(both: Concerns) -> None:
    await both.add_claim_code("h1", "telegram", 3600)
    await both.add_claim_code("h2", "telegram", 3600)
    await both.add_claim_code("h3", "discord", 3600)
    await both.add_claim_code("expired", "discord", -1)
    assert await both.redeem_claim("expired", "discord", "discord:9") is False
    assert await both.redeem_claim("h1", "telegram", "telegram:7") is True
    assert await both.redeem_claim("h2", "telegram", "telegram:8") is False
    assert await both.live_claim_codes("telegram") == []
    assert await both.live_claim_codes("discord") == ["h3"]
    assert [(o["user_key"], o["platform"]) for o in await both.claimed_owners()] == [
        ("telegram:7", "telegram")
    ]


async def test_a_chat_is_recorded_retitled_and_read_with_its_user(both: Concerns) -> None:
    await both.upsert_chat("test:g1", "test", "g1", None, "group", "Tea club")
    await both.upsert_chat("test:g1", "test", "g1", None, "group", "Tea & cake club")
    await both.select_partner("test:g1", "mira")
    await both.upsert_user("test:1", "test", "1", "Alice", "alice")
    expected = ChatRow("test:g1", "test", "g1", None, "group", "Tea & cake club", "mira")
    assert await both.chat("test:g1") == expected
    assert await both.selected_partner("test:g1") == "mira"
    chat, user = await both.chat_and_user("test:g1", "test:1")
    assert chat == expected
    assert user == await both.user("test:1")
    assert await both.chat_and_user("test:nowhere", "test:404") == (None, None)
    chat, user = await both.chat_and_user("test:g1", "test:404")
    assert (chat, user) == (expected, None)


async def test_bindings_by_command_and_by_config(both: Concerns) -> None:
    assert await both.bind("test", "g1", "mira", "command") is True
    assert await both.bind("test", "g1", "mira", "command") is False
    await both.bind("test", "g1", "kai", "command")
    await both.replace_config_bindings([("test", "g2", "mira"), ("test", "g1", "kai")])
    assert sorted((b["chat_id"], b["partner_id"], b["source"]) for b in await both.bindings()) == [
        ("g1", "kai", "config"),
        ("g1", "mira", "command"),
        ("g2", "mira", "config"),
    ]
    # a config binding is not the command's to remove
    assert await both.unbind("test", "g1", None) == 1
    assert [b["partner_id"] for b in await both.bindings("test", "g1")] == ["kai"]
    await both.replace_config_bindings([])
    assert await both.bindings() == []


async def test_checkin_candidates_carry_what_the_gates_need(both: Concerns) -> None:
    await both.upsert_user("test:1", "test", "1", "Alice", None)
    await both.set_user_timezone("test:1", "Asia/Tokyo")
    await both.set_checkins("mira", "test:1", True)
    await both.set_checkins("mira", "test:2", True)
    await both.set_checkins("mira", "test:3", False, "asked to stop")
    await both.set_checkins("kai", "test:1", True)
    await both.record_checkin("mira", "test:1", "morning", False, 100.0)
    await both.record_checkin("mira", "test:1", "evening", False, 200.0)
    await both.record_checkin("mira", "test:1", "evening", True, 300.0)
    candidates = await both.checkin_candidates("mira", day_start=150.0, week_start=50.0)
    assert sorted(candidates, key=lambda c: c["user_key"]) == [
        {
            "user_key": "test:1",
            "timezone": "Asia/Tokyo",
            "last_message": None,
            "last_checkin": 200.0,
            "today": 1,
            "this_week": 2,
        },
        {
            "user_key": "test:2",
            "timezone": None,
            "last_message": None,
            "last_checkin": None,
            "today": 0,
            "this_week": 0,
        },
    ]
    assert sorted(await both.checkin_partners("test:1")) == ["kai", "mira"]
    assert await both.checkins_since("mira", "test:1", 150.0) == 1
    setting = await both.checkin_setting("mira", "test:3")
    assert setting is not None
    assert (setting["enabled"], setting["disabled_reason"]) == (0, "asked to stop")
    assert await both.last_user_message_at("mira", "test:1") is None


async def test_a_reminder_is_added_once_and_fires_once(both: Concerns) -> None:
    assert await both.add_reminder("mira", "test:1", "2026-04-02", "the exam") is True
    assert await both.add_reminder("mira", "test:1", "2026-04-02", "the exam") is False
    assert await both.add_reminder("mira", "test:1", "2026-04-01", "the flight") is True
    pending = await both.pending_reminders()
    assert [r["about"] for r in pending] == ["the flight", "the exam"]
    assert await both.close_reminder(pending[0]["id"], "done") is True
    assert await both.close_reminder(pending[0]["id"], "done") is False
    assert [r["about"] for r in await both.pending_reminders()] == ["the exam"]


async def test_sessions_open_end_and_are_found(both: Concerns) -> None:
    def new(chat: str, partner: str | None, **extra: str) -> dict[str, Any]:
        return {
            "partner_id": partner,
            "chat_key": chat,
            "user_key": "test:1",
            "audience": "user:test:1",
            "system_prompt": "You are Mira.",
            **extra,
        }

    first = await both.create_session(**new("test:1", "mira"), session_id="s-aaaa1")
    owner = await both.create_session(**new("test:1", None))
    consult = await both.create_session(**new("test:1#consult", "kai"))
    assert first.id == "s-aaaa1" and first.title == "" and first.reviewed_upto == 0
    assert await both.session("s-aaaa1") == first
    assert await both.open_session("test:1", "mira") == first
    assert await both.open_session("test:1", None) == owner
    await both.set_session_title(first.id, "tea")
    await both.set_session_title(first.id, "coffee")
    assert [s.id for s in await both.find_sessions("mira", "s-aa")] == ["s-aaaa1"]
    assert await both.count_sessions("test:1", "mira") == 1
    assert sorted(await both.end_chat_sessions("test:1", "new")) == sorted(
        [first.id, owner.id, consult.id]
    )
    assert await both.open_session("test:1", "mira") is None
    ended = await both.latest_session("test:1", "mira")
    assert ended is not None and ended.title == "tea" and ended.ended_at is not None
    assert [s.id for s in await both.partner_sessions("mira", "test:1")] == [first.id]
    assert await both.partner_sessions("mira", "test:2") == []
    assert [s.id for s in await both.sessions_of("kai")] == [consult.id]
    assert set(await both.last_activity()) == {"mira", "kai"}
    assert await both.message_counts([first.id]) == {}


async def test_only_the_newest_transcript_references_stay(both: Concerns) -> None:
    for referenced in ("s1", "s2", "s3", "s2"):
        await both.add_transcript_ref("owner", referenced, keep=2)
    assert sorted(await both.transcript_refs("owner")) == ["s2", "s3"]


async def add_message(store: Concerns, session_id: str, role: str) -> int:
    """A conversation message in a session (PostgreSQL has no messages concern yet: SQL)."""
    if isinstance(store, PostgresConcerns):
        row = await store._one(
            "INSERT INTO messages (chat_key, session_id, partner_id, role, text, audience,"
            " status, created_at) VALUES ('test:1', $1, 'mira', $2, 'hi', 'user:test:1',"
            " 'done', 1.0) RETURNING id",
            session_id,
            role,
        )
        assert row is not None
        return int(row[0])
    new = NewMessage("test:1", role, "hi", "user:test:1", session_id=session_id)
    added = await store.add_message(new)
    assert added is not None
    return added


async def test_reviews_are_debounced_counted_and_watermarked(both: Concerns) -> None:
    session = await both.create_session(
        partner_id="mira", chat_key="test:1", user_key="test:1", audience="user:test:1",
        system_prompt="",
    )  # fmt: skip
    quiet = await both.create_session(
        partner_id="mira", chat_key="test:2", user_key="test:2", audience="user:test:2",
        system_prompt="",
    )  # fmt: skip
    await add_message(both, session.id, "tool")
    assert await both.sessions_to_review() == []
    last = await add_message(both, session.id, "user")
    assert [s.id for s in await both.sessions_to_review(partner_id="mira")] == [session.id]
    assert await both.sessions_to_review(partner_id="kai") == []
    assert await both.sessions_to_review(idle_before=0.0) == []
    await both.mark_review_due(session.id, 200.0)
    await both.mark_review_due(session.id, 300.0)
    await both.mark_review_due(quiet.id, 100.0)
    assert [s.id for s in await both.due_reviews(250.0)] == [quiet.id, session.id]
    assert await both.review_failed(session.id, "timeout", retry_at=400.0) == 1
    assert await both.review_failed(session.id, "x" * 600, retry_at=500.0) == 2
    failed = await both.session(session.id)
    assert failed is not None and failed.review_due_at == 500.0
    assert failed.review_error == "x" * 500 and failed.reviewed_upto == 0
    await both.review_succeeded(session.id, last)
    await both.review_succeeded(session.id, last - 1)
    reviewed = await both.session(session.id)
    assert reviewed is not None
    assert (reviewed.reviewed_upto, reviewed.review_attempts, reviewed.review_due_at) == (
        last,
        0,
        None,
    )
    assert await both.sessions_to_review() == []
    assert set(await both.last_reviews()) == {"mira"}
