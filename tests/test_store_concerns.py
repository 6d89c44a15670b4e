"""The store's concerns held to one contract on every backend (the ``store`` fixture runs each
test on SQLite and on PostgreSQL): the audit log and settings, usage and resting notices,
users, pairings and owner claims, chats and bindings, check-ins and reminders, sessions,
transcript references and review state."""

from __future__ import annotations

from typing import Any

from bot.store import ChatRow, NewMessage, Store


async def test_audit_rows_come_newest_first_and_filter_by_action(store: Store) -> None:
    await store.audit("owner", "bind", chat="g1")
    await store.audit("user:2", "pairing", code="ABC", nested={"n": 1})
    await store.audit("owner", "bind", chat="g2")
    rows = await store.audit_rows()
    assert [(r["actor"], r["action"], r["detail"]) for r in rows] == [
        ("owner", "bind", {"chat": "g2"}),
        ("user:2", "pairing", {"code": "ABC", "nested": {"n": 1}}),
        ("owner", "bind", {"chat": "g1"}),
    ]
    assert [r["detail"]["chat"] for r in await store.audit_rows("bind", limit=1)] == ["g2"]


async def test_a_setting_is_put_replaced_and_deleted(store: Store) -> None:
    await store.put_setting("memory.review_turns", "3")
    await store.put_setting("memory.review_turns", "5")
    await store.put_setting("owner.timezone", "Asia/Tokyo")
    assert await store.settings() == {
        "memory.review_turns": "5",
        "owner.timezone": "Asia/Tokyo",
    }
    assert await store.delete_setting("memory.review_turns") is True
    assert await store.delete_setting("memory.review_turns") is False
    assert await store.settings() == {"owner.timezone": "Asia/Tokyo"}


async def test_usage_adds_up_per_day_partner_kind_and_model(store: Store) -> None:
    await store.add_usage("2026-03-09", "mira", "chat", "m1", 100, 10)
    await store.add_usage("2026-03-09", "mira", "chat", "m1", 50, 5)
    await store.add_usage("2026-03-09", "mira", "review", "m1", 7, 3)
    await store.add_usage("2026-03-09", "kai", "chat", "m2", 1, 1)
    await store.add_usage("2026-03-08", "mira", "chat", "m1", 1000, 1000)
    await store.add_units("2026-03-09", "mira", "speech", "tts", 12.5)
    await store.add_units("2026-03-09", "mira", "speech", "tts", 0.25)
    assert await store.tokens_on("2026-03-09") == {"mira": 175, "kai": 2}
    assert await store.units_on("2026-03-09") == {"mira": {"speech": 12.75}}
    rows = await store.usage("2026-03-09")
    assert [(r["partner_id"], r["kind"], r["calls"], r["prompt_tokens"]) for r in rows] == [
        ("kai", "chat", 1, 1),
        ("mira", "chat", 2, 150),
        ("mira", "review", 1, 7),
        ("mira", "speech", 2, 0),
    ]


async def test_a_resting_notice_is_remembered_per_kind_and_subject(store: Store) -> None:
    assert await store.last_rest_notice("budget", "mira") is None
    await store.note_rest_notice("budget", "mira")
    first = await store.last_rest_notice("budget", "mira")
    await store.note_rest_notice("budget", "mira")
    await store.note_rest_notice("rate", "user:1")
    again = await store.last_rest_notice("budget", "mira")
    assert first is not None and again is not None and again >= first
    notices = await store.rest_notices_since(0)
    assert sorted((n["kind"], n["subject"]) for n in notices) == [
        ("budget", "mira"),
        ("rate", "user:1"),
    ]
    assert await store.rest_notices_since(again + 3600) == []


async def test_a_user_is_recorded_once_and_renamed_in_place(store: Store) -> None:
    await store.upsert_user("test:1", "test", "1", "Alice", "alice")
    await store.set_user_access("test:1", "allowed")
    await store.upsert_user("test:1", "test", "1", "Alice B.", None)
    await store.set_voice_mode("test:1", "always")
    await store.set_user_timezone("test:1", "Europe/Paris")
    user = await store.user("test:1")
    assert user is not None
    assert (user["display_name"], user["username"], user["access"], user["timezone"]) == (
        "Alice B.",
        None,
        "allowed",
        "Europe/Paris",
    )
    assert await store.voice_mode("test:1") == "always"
    assert await store.set_user_access("test:404", "allowed") is False
    assert await store.user("test:404") is None


async def test_pairings_live_until_closed_and_an_approval_is_told_once(store: Store) -> None:
    await store.create_pairing("AAA", "test:1", 3600)
    await store.create_pairing("BBB", "test:2", 3600)
    await store.create_pairing("OLD", "test:3", -1)
    assert [p["code"] for p in await store.live_pairings()] == ["AAA", "BBB"]
    assert [p["code"] for p in await store.live_pairings("test:2")] == ["BBB"]
    await store.close_pairing("AAA", "approved")
    assert [p["code"] for p in await store.live_pairings()] == ["BBB"]
    assert [p["code"] for p in await store.unannounced_approvals()] == ["AAA"]
    assert await store.take_announcement("AAA") is True
    assert await store.take_announcement("AAA") is False
    assert await store.take_announcement("BBB") is False
    assert await store.unannounced_approvals() == []
    pairing = await store.pairing("AAA")
    assert pairing is not None and pairing["status"] == "approved"


async def test_users_are_listed_a_page_at_a_time_with_their_checkins(store: Store) -> None:
    for n in range(7):
        await store.upsert_user(f"test:{n}", "test", str(n), f"User {n}", None)
    await store.set_checkins("mira", "test:2", True)
    assert await store.user_count() == 7
    pages = [await store.web_users(3, offset) for offset in (0, 3, 6, 9)]
    assert [len(rows) for rows in pages] == [3, 3, 1, 0]
    keys = [row["user_key"] for rows in pages for row in rows]
    assert sorted(keys) == [f"test:{n}" for n in range(7)]
    [with_checkin] = [row for rows in pages for row in rows if row["checkins"]]
    assert with_checkin["user_key"] == "test:2"
    assert [c["partner_id"] for c in with_checkin["checkins"]] == ["mira"]


async def test_waiting_pairings_are_counted_and_the_oldest_listed(store: Store) -> None:
    await store.upsert_user("test:1", "test", "1", "Alice", None)
    await store.create_pairing("AAA", "test:1", 3600)
    await store.create_pairing("BBB", "test:2", 3600)
    await store.create_pairing("CCC", "test:3", 3600)
    await store.create_pairing("OLD", "test:4", -1)
    await store.close_pairing("CCC", "denied")
    assert await store.live_pairing_count() == 2
    listed = await store.web_pairings(1)
    assert [(p["code"], p["display_name"]) for p in listed] == [("AAA", "Alice")]
    assert [p["display_name"] for p in await store.web_pairings(5)] == ["Alice", None]


async def test_a_platform_is_claimed_once_and_its_other_codes_die(store: Store) -> None:
    await store.add_claim_code("h1", "telegram", 3600)
    await store.add_claim_code("h2", "telegram", 3600)
    await store.add_claim_code("h3", "discord", 3600)
    await store.add_claim_code("expired", "discord", -1)
    assert await store.redeem_claim("expired", "discord", "discord:9") is False
    assert await store.redeem_claim("h1", "telegram", "telegram:7") is True
    assert await store.redeem_claim("h2", "telegram", "telegram:8") is False
    assert await store.live_claim_codes("telegram") == []
    assert await store.live_claim_codes("discord") == ["h3"]
    assert [(o["user_key"], o["platform"]) for o in await store.claimed_owners()] == [
        ("telegram:7", "telegram")
    ]


async def test_a_chat_is_recorded_retitled_and_read_with_its_user(store: Store) -> None:
    await store.upsert_chat("test:g1", "test", "g1", None, "group", "Tea club")
    await store.upsert_chat("test:g1", "test", "g1", None, "group", "Tea & cake club")
    await store.select_partner("test:g1", "mira")
    await store.upsert_user("test:1", "test", "1", "Alice", "alice")
    expected = ChatRow("test:g1", "test", "g1", None, "group", "Tea & cake club", "mira")
    assert await store.chat("test:g1") == expected
    assert await store.selected_partner("test:g1") == "mira"
    chat, user = await store.chat_and_user("test:g1", "test:1")
    assert chat == expected
    assert user == await store.user("test:1")
    assert await store.chat_and_user("test:nowhere", "test:404") == (None, None)
    chat, user = await store.chat_and_user("test:g1", "test:404")
    assert (chat, user) == (expected, None)


async def test_bindings_by_command_and_by_config(store: Store) -> None:
    assert await store.bind("test", "g1", "mira", "command") is True
    assert await store.bind("test", "g1", "mira", "command") is False
    await store.bind("test", "g1", "kai", "command")
    await store.replace_config_bindings([("test", "g2", "mira"), ("test", "g1", "kai")])
    assert sorted((b["chat_id"], b["partner_id"], b["source"]) for b in await store.bindings()) == [
        ("g1", "kai", "config"),
        ("g1", "mira", "command"),
        ("g2", "mira", "config"),
    ]
    # a config binding is not the command's to remove
    assert await store.unbind("test", "g1", None) == 1
    assert [b["partner_id"] for b in await store.bindings("test", "g1")] == ["kai"]
    await store.replace_config_bindings([])
    assert await store.bindings() == []


async def test_checkin_candidates_carry_what_the_gates_need(store: Store) -> None:
    await store.upsert_user("test:1", "test", "1", "Alice", None)
    await store.set_user_timezone("test:1", "Asia/Tokyo")
    await store.set_checkins("mira", "test:1", True)
    await store.set_checkins("mira", "test:2", True)
    await store.set_checkins("mira", "test:3", False, "asked to stop")
    await store.set_checkins("kai", "test:1", True)
    await store.record_checkin("mira", "test:1", "morning", False, 100.0)
    await store.record_checkin("mira", "test:1", "evening", False, 200.0)
    await store.record_checkin("mira", "test:1", "evening", True, 300.0)
    candidates = await store.checkin_candidates("mira", day_start=150.0, week_start=50.0)
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
    assert sorted(await store.checkin_partners("test:1")) == ["kai", "mira"]
    assert await store.checkins_since("mira", "test:1", 150.0) == 1
    setting = await store.checkin_setting("mira", "test:3")
    assert setting is not None
    assert (setting["enabled"], setting["disabled_reason"]) == (0, "asked to stop")
    assert await store.last_user_message_at("mira", "test:1") is None


async def test_a_reminder_is_added_once_and_fires_once(store: Store) -> None:
    assert await store.add_reminder("mira", "test:1", "2026-04-02", "the exam") is True
    assert await store.add_reminder("mira", "test:1", "2026-04-02", "the exam") is False
    assert await store.add_reminder("mira", "test:1", "2026-04-01", "the flight") is True
    pending = await store.pending_reminders()
    assert [r["about"] for r in pending] == ["the flight", "the exam"]
    assert await store.close_reminder(pending[0]["id"], "done") is True
    assert await store.close_reminder(pending[0]["id"], "done") is False
    assert [r["about"] for r in await store.pending_reminders()] == ["the exam"]


async def test_sessions_open_end_and_are_found(store: Store) -> None:
    def new(chat: str, partner: str | None, **extra: str) -> dict[str, Any]:
        return {
            "partner_id": partner,
            "chat_key": chat,
            "user_key": "test:1",
            "audience": "user:test:1",
            "system_prompt": "You are Mira.",
            **extra,
        }

    first = await store.create_session(**new("test:1", "mira"), session_id="s-aaaa1")
    owner = await store.create_session(**new("test:1", None))
    consult = await store.create_session(**new("test:1#consult", "kai"))
    assert first.id == "s-aaaa1" and first.title == "" and first.reviewed_upto == 0
    assert await store.session("s-aaaa1") == first
    assert await store.open_session("test:1", "mira") == first
    assert await store.open_session("test:1", None) == owner
    await store.set_session_title(first.id, "tea")
    await store.set_session_title(first.id, "coffee")
    assert [s.id for s in await store.find_sessions("mira", "s-aa")] == ["s-aaaa1"]
    assert await store.count_sessions("test:1", "mira") == 1
    assert sorted(await store.end_chat_sessions("test:1", "new")) == sorted(
        [first.id, owner.id, consult.id]
    )
    assert await store.open_session("test:1", "mira") is None
    ended = await store.latest_session("test:1", "mira")
    assert ended is not None and ended.title == "tea" and ended.ended_at is not None
    assert [s.id for s in await store.partner_sessions("mira", "test:1")] == [first.id]
    assert await store.partner_sessions("mira", "test:2") == []
    assert [s.id for s in await store.sessions_of("kai")] == [consult.id]
    assert set(await store.last_activity()) == {"mira", "kai"}
    assert await store.message_counts([first.id]) == {}


async def test_a_partners_sessions_are_counted_and_paged(store: Store) -> None:
    for n in range(5):
        await store.create_session(
            partner_id="mira", chat_key=f"test:{n}", user_key=f"test:{n % 2}",
            audience="user:test:1", system_prompt="",
        )  # fmt: skip
    assert await store.partner_session_count("mira") == 5
    assert await store.partner_session_count("mira", "test:1") == 2
    assert await store.partner_session_count("kai") == 0
    pages = [await store.partner_sessions("mira", None, 2, offset) for offset in (0, 2, 4)]
    assert [len(rows) for rows in pages] == [2, 2, 1]
    assert len({row.id for rows in pages for row in rows}) == 5
    assert len(await store.partner_sessions("mira", "test:0", 10, 1)) == 2


async def test_only_the_newest_transcript_references_stay(store: Store) -> None:
    for referenced in ("s1", "s2", "s3", "s2"):
        await store.add_transcript_ref("owner", referenced, keep=2)
    assert sorted(await store.transcript_refs("owner")) == ["s2", "s3"]


async def add_message(store: Store, session_id: str, role: str) -> int:
    """A conversation message in a session."""
    new = NewMessage("test:1", role, "hi", "user:test:1", session_id=session_id)
    added = await store.add_message(new)
    assert added is not None
    return added


async def test_reviews_are_debounced_counted_and_watermarked(store: Store) -> None:
    session = await store.create_session(
        partner_id="mira", chat_key="test:1", user_key="test:1", audience="user:test:1",
        system_prompt="",
    )  # fmt: skip
    quiet = await store.create_session(
        partner_id="mira", chat_key="test:2", user_key="test:2", audience="user:test:2",
        system_prompt="",
    )  # fmt: skip
    await add_message(store, session.id, "tool")
    assert await store.sessions_to_review() == []
    last = await add_message(store, session.id, "user")
    assert [s.id for s in await store.sessions_to_review(partner_id="mira")] == [session.id]
    assert await store.sessions_to_review(partner_id="kai") == []
    assert await store.sessions_to_review(idle_before=0.0) == []
    await store.mark_review_due(session.id, 200.0)
    await store.mark_review_due(session.id, 300.0)
    await store.mark_review_due(quiet.id, 100.0)
    assert [s.id for s in await store.due_reviews(250.0)] == [quiet.id, session.id]
    assert await store.review_failed(session.id, "timeout", retry_at=400.0) == 1
    assert await store.review_failed(session.id, "x" * 600, retry_at=500.0) == 2
    failed = await store.session(session.id)
    assert failed is not None and failed.review_due_at == 500.0
    assert failed.review_error == "x" * 500 and failed.reviewed_upto == 0
    await store.review_succeeded(session.id, last)
    await store.review_succeeded(session.id, last - 1)
    reviewed = await store.session(session.id)
    assert reviewed is not None
    assert (reviewed.reviewed_upto, reviewed.review_attempts, reviewed.review_due_at) == (
        last,
        0,
        None,
    )
    assert await store.sessions_to_review() == []
    assert set(await store.last_reviews()) == {"mira"}


async def test_a_review_reads_no_further_than_a_message_still_waiting_for_its_turn(
    store: Store,
) -> None:
    """A message that arrives while its chat's turn runs is stored before that turn's reply,
    so its id is the lower one: a review that read past it while it waited would put its
    watermark beyond it, and once its own turn closed it no review would ever see it."""
    session = await store.create_session(
        partner_id="mira", chat_key="test:1", user_key="test:1", audience="user:test:1",
        system_prompt="",
    )  # fmt: skip

    def inbound(text: str) -> NewMessage:
        return NewMessage(
            chat_key="test:1", role="user", text=text, audience="user:test:1",
            status="pending", dedup_key=text, queue_key="test:1|mira", partner_id="mira",
        )  # fmt: skip

    def reply(text: str) -> NewMessage:
        return NewMessage(
            chat_key="test:1", role="assistant", text=text, audience="user:test:1",
            status="delivering", session_id=session.id, partner_id="mira",
        )  # fmt: skip

    other_chat = NewMessage(
        chat_key="test:2", role="user", text="elsewhere", audience="user:test:2",
        status="pending", dedup_key="elsewhere", queue_key="test:2|mira",
    )  # fmt: skip
    early = await store.add_message(other_chat)  # another chat's wait stops nothing here
    first = await store.add_message(inbound("I started at the bakery"))
    second = await store.add_message(inbound("My manager is Rosa"))  # during the first turn
    assert early is not None and first is not None and second is not None
    await store.finish_turn([first], session.id, reply("Congratulations!"))
    readable = await store.reviewable_messages(session.id, after_id=0)
    assert [row.id for row in readable] == [first] and early < first
    await store.finish_turn([second], session.id, reply("Rosa sounds kind"))
    rest = await store.reviewable_messages(session.id, after_id=first)
    assert [row.text for row in rest] == [
        "My manager is Rosa",
        "Congratulations!",
        "Rosa sounds kind",
    ]
