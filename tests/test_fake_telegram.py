"""Tests of the fake Telegram Bot API server, driven by the real python-telegram-bot client."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import (
    Bot,
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    MessageEntity,
    ReactionTypeEmoji,
    Update,
)
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    Conflict,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import (
    Application,
    CallbackContext,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from tests.fakes.fake_telegram import TOKEN, ApiError, Call, FakeTelegram

Context = CallbackContext[Any, Any, Any, Any]


@pytest.fixture(autouse=True)
def timedelta_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """RetryAfter.retry_after is a timedelta (PTB's opt-in; the int form is deprecated)."""
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url) as client:
        yield client


def make_app(fake: FakeTelegram) -> Application[Any, Any, Any, Any, Any, Any]:
    return (
        Application.builder()
        .token(TOKEN)
        .base_url(fake.base_url)
        .base_file_url(fake.base_file_url)
        .build()
    )


@contextlib.asynccontextmanager
async def polling_app(
    fake: FakeTelegram, *handlers: Any
) -> AsyncIterator[Application[Any, Any, Any, Any, Any, Any]]:
    app = make_app(fake)
    for handler in handlers:
        app.add_handler(handler)
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(poll_interval=0, timeout=10)
    try:
        yield app
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- basics


async def test_get_me_describes_the_bot(fake: FakeTelegram) -> None:
    fake.can_read_all_group_messages = True
    async with Bot(TOKEN, base_url=fake.base_url) as bot:
        me = await bot.get_me()
    assert me.id == fake.bot_id
    assert me.is_bot
    assert me.username == "companion_bot"
    assert me.can_read_all_group_messages is True
    assert me.can_join_groups is True
    assert [call.method for call in fake.calls] == ["getMe", "getMe"]
    assert all(call.ok for call in fake.calls)


async def test_wrong_token_and_unknown_method(fake: FakeTelegram, bot: Bot) -> None:
    wrong = Bot("42:WRONG", base_url=fake.base_url)
    try:
        with pytest.raises(InvalidToken, match="(?i)rejected by the server"):
            await wrong.initialize()
    finally:
        await wrong.shutdown()
    assert fake.calls[-1].status == 401

    with pytest.raises(EndPointNotFound):
        await bot.do_api_request("noSuchMethod")
    assert fake.calls[-1].status == 404
    # method names are case-insensitive and recorded with Telegram's spelling
    assert await bot.do_api_request("GETME") is not None
    assert fake.calls[-1].method == "getMe"


async def test_send_message_records_decoded_params(fake: FakeTelegram, bot: Bot) -> None:
    fake.add_chat({"id": -1001, "type": "supergroup", "title": "Forum", "is_forum": True})
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="y")]])
    message = await bot.send_message(
        chat_id=-1001,
        text="<b>Hi</b> &amp; welcome",
        parse_mode=ParseMode.HTML,
        message_thread_id=7,
        reply_markup=keyboard,
    )
    [call] = fake.sent(chat_id=-1001)
    assert call.params["chat_id"] == -1001
    assert call.params["message_thread_id"] == 7
    assert call.params["parse_mode"] == "HTML"
    assert call.params["reply_markup"] == {
        "inline_keyboard": [[{"text": "Yes", "callback_data": "y"}]]
    }
    assert call.text == "<b>Hi</b> &amp; welcome"
    # the result is what Telegram returns: visible text, topic fields, sender = bot
    assert message.text == "Hi & welcome"
    assert message.message_thread_id == 7
    assert message.is_topic_message is True
    assert message.from_user is not None and message.from_user.id == fake.bot_id
    assert message.reply_markup == keyboard


async def test_numeric_text_stays_a_string_and_ids_are_per_chat(
    fake: FakeTelegram, bot: Bot
) -> None:
    first = await bot.send_message(chat_id=10, text="123")
    second = await bot.send_message(chat_id=10, text="true")
    other = await bot.send_message(chat_id=20, text="hi")
    assert [c.params["text"] for c in fake.sent(chat_id=10)] == ["123", "true"]
    assert (first.message_id, second.message_id, other.message_id) == (1, 2, 1)
    # a user message in the same chat continues the sequence
    update = fake.message_update(chat_id=10, text="from user")
    assert update["message"]["message_id"] == 3


async def test_general_topic_rejects_thread_id_but_chat_action_accepts_it(
    fake: FakeTelegram, bot: Bot
) -> None:
    fake.add_chat({"id": -1002, "type": "supergroup", "title": "Forum", "is_forum": True})
    with pytest.raises(BadRequest, match="(?i)message thread not found"):
        await bot.send_message(chat_id=-1002, text="hello", message_thread_id=1)
    assert await bot.send_chat_action(chat_id=-1002, action="typing", message_thread_id=1)
    sent = await bot.send_message(chat_id=-1002, text="hello")
    assert sent.message_thread_id is None
    [action] = fake.sent("sendChatAction")
    assert action.params == {"chat_id": -1002, "action": "typing", "message_thread_id": 1}


async def test_text_limits_and_replies(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(chat_id=1, text="x" * 4097)
    assert await bot.send_message(chat_id=1, text="x" * 4096)
    # 4096 characters of emoji are 8192 UTF-16 code units: too long
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(chat_id=1, text="😀" * 2100)
    with pytest.raises(BadRequest, match="(?i)message to be replied not found"):
        await bot.send_message(chat_id=1, text="re", reply_to_message_id=999)
    update = fake.send_user_message(chat_id=1, text="question")
    reply = await bot.send_message(
        chat_id=1, text="answer", reply_to_message_id=update["message"]["message_id"]
    )
    assert reply.reply_to_message is not None
    assert reply.reply_to_message.text == "question"


# --------------------------------------------------------------------------- getUpdates


async def test_long_poll_holds_until_an_update_is_pushed(fake: FakeTelegram, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=30))
    await fake.wait_for_pending_polls(1)
    assert not poll.done()
    pending = fake.calls[-1]
    assert pending.method == "getUpdates"
    assert pending.status is None
    assert pending.params["timeout"] == 30

    fake.send_user_message(chat_id=5, text="wake up")
    updates = await asyncio.wait_for(poll, 5)
    assert [u.message.text for u in updates if u.message] == ["wake up"]
    assert pending.status == 200
    assert fake.pending_polls == 0


async def test_zero_timeout_answers_at_once(fake: FakeTelegram, bot: Bot) -> None:
    assert await asyncio.wait_for(bot.get_updates(timeout=0), 5) == ()
    assert fake.calls[-1].ok


async def test_offsets_confirm_and_drop_updates(fake: FakeTelegram, bot: Bot) -> None:
    ids = [fake.send_user_message(chat_id=5, text=f"m{i}")["update_id"] for i in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3

    first = await bot.get_updates(timeout=0)
    assert [u.update_id for u in first] == ids
    # not confirmed yet: delivered again
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == ids
    assert [u.update_id for u in await bot.get_updates(timeout=0, limit=1)] == ids[:1]

    confirmed = await bot.get_updates(offset=ids[1] + 1, timeout=0)
    assert [u.update_id for u in confirmed] == ids[2:]
    # confirmed updates never come back, whatever offset is asked for
    assert [u.update_id for u in await bot.get_updates(offset=0, timeout=0)] == ids[2:]
    assert [u["update_id"] for u in fake.pending_updates] == ids[2:]

    fake.send_user_message(chat_id=5, text="later")
    latest = await bot.get_updates(offset=-1, timeout=0)
    assert [u.message.text for u in latest if u.message] == ["later"]


async def test_allowed_updates_filter_reactions(fake: FakeTelegram, bot: Bot) -> None:
    reaction = {
        "message_reaction": {
            "chat": {"id": 5, "type": "private", "first_name": "Alice"},
            "message_id": 1,
            "date": 1_700_000_000,
            "user": {"id": 1001, "is_bot": False, "first_name": "Alice"},
            "old_reaction": [],
            "new_reaction": [{"type": "emoji", "emoji": "👍"}],
        }
    }
    fake.push_update(reaction)
    fake.send_user_message(chat_id=5, text="plain")
    default = await bot.get_updates(timeout=0)
    assert [u.message.text for u in default if u.message] == ["plain"]
    assert all(u.message_reaction is None for u in default)

    fake.push_update({"message_reaction": reaction["message_reaction"]})
    wanted = await bot.get_updates(
        offset=default[-1].update_id + 1, timeout=0, allowed_updates=["message_reaction"]
    )
    assert len(wanted) == 1 and wanted[0].message_reaction is not None


async def test_newer_poll_terminates_the_pending_one(fake: FakeTelegram) -> None:
    async with (
        Bot(TOKEN, base_url=fake.base_url) as first,
        Bot(TOKEN, base_url=fake.base_url) as second,
    ):
        older = asyncio.create_task(first.get_updates(timeout=30))
        await fake.wait_for_pending_polls(1)
        newer = asyncio.create_task(second.get_updates(timeout=30))
        with pytest.raises(Conflict, match="(?i)terminated by other getUpdates"):
            await asyncio.wait_for(older, 5)
        fake.send_user_message(chat_id=5, text="to the newer poll")
        assert len(await asyncio.wait_for(newer, 5)) == 1


async def test_stalled_get_updates_is_held_until_released(fake: FakeTelegram, bot: Bot) -> None:
    fake.stalled = True
    fake.send_user_message(chat_id=5, text="queued while stalled")
    poll = asyncio.create_task(bot.get_updates(timeout=0))
    await fake.wait_for_pending_polls(1)
    # other methods still answer while the poll hangs
    assert (await bot.get_me()).username == "companion_bot"
    assert not poll.done()

    fake.stalled = False
    updates = await asyncio.wait_for(poll, 5)
    assert [u.message.text for u in updates if u.message] == ["queued while stalled"]


async def test_close_answers_a_stalled_poll_at_once() -> None:
    fake = FakeTelegram()
    await fake.start()
    async with Bot(TOKEN, base_url=fake.base_url) as bot:
        fake.stalled = True
        poll = asyncio.create_task(bot.get_updates(timeout=0))
        await fake.wait_for_pending_polls(1)
        await asyncio.wait_for(fake.close(), 3)
        # the held request was answered (empty), not left to time out or reset
        assert await asyncio.wait_for(poll, 3) == ()


# --------------------------------------------------------------------------- Application


async def test_application_handles_a_pushed_message_and_replies(fake: FakeTelegram) -> None:
    async def echo(update: Update, _context: Context) -> None:
        assert update.message is not None and update.message.text is not None
        await update.message.reply_text(f"echo: {update.message.text}")

    async def start(update: Update, _context: Context) -> None:
        assert update.message is not None
        await update.message.reply_text("welcome")

    handlers = (
        CommandHandler("start", start),
        MessageHandler(filters.TEXT & ~filters.COMMAND, echo),
    )
    async with polling_app(fake, *handlers):
        await fake.wait_for_pending_polls(1)
        fake.send_user_message(chat_id=1001, text="hello")
        [reply] = await fake.wait_for_sent(chat_id=1001)
        assert reply.text == "echo: hello"
        # private chats: PTB does not quote by default
        assert "reply_parameters" not in reply.params

        fake.send_user_message(chat_id=1001, text="/start")
        await fake.wait_for_sent(lambda c: c.text == "welcome", chat_id=1001)

        group = fake.send_user_message(
            chat_id=-100500,
            chat_type="supergroup",
            chat_title="Friends",
            text="in a topic",
            message_thread_id=42,
            is_topic_message=True,
        )
        [topic_reply] = await fake.wait_for_sent(chat_id=-100500)
        assert topic_reply.params["message_thread_id"] == 42
        assert (
            topic_reply.params["reply_parameters"]["message_id"] == (group["message"]["message_id"])
        )
    # the Updater confirmed everything it fetched before it stopped
    assert fake.pending_updates == []


async def test_callback_query_edit_and_answer(fake: FakeTelegram) -> None:
    async def on_button(update: Update, _context: Context) -> None:
        query = update.callback_query
        assert query is not None
        await query.answer("ok")
        await query.edit_message_text(f"chose {query.data}")

    async with Bot(TOKEN, base_url=fake.base_url) as bot:
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("A", callback_data="a")]])
        sent = await bot.send_message(chat_id=7, text="pick", reply_markup=keyboard)

    async with polling_app(fake, CallbackQueryHandler(on_button)):
        update = fake.callback_query_update(
            chat_id=7, user_id=1001, data="a", message_id=sent.message_id
        )
        fake.push_update(update)
        [edit] = await fake.wait_for_sent(method="editMessageText")
        assert edit.params["text"] == "chose a"
        assert fake.answered_callback_queries == [update["callback_query"]["id"]]
    stored = fake.get_message(7, sent.message_id)
    assert stored is not None and stored["text"] == "chose a"
    assert "reply_markup" not in stored  # an edit without markup drops the keyboard


# --------------------------------------------------------------------------- faults


async def test_fail_next_429_raises_retry_after(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next("sendMessage", retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(chat_id=1, text="hi")
    assert caught.value.retry_after == dtm.timedelta(seconds=3)
    failed = fake.calls[-1]
    assert failed.status == 429 and failed.description == "Too Many Requests: retry after 3"
    # PTB does not retry by itself, and the fault was used up
    assert fake.sent() == []
    await bot.send_message(chat_id=1, text="hi again")
    assert [c.text for c in fake.sent()] == ["hi again"]


async def test_other_fail_next_statuses_map_to_ptb_errors(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next("sendMessage", status=403)
    fake.fail_next("sendMessage", status=400, description="Bad Request: chat not found")
    fake.fail_next("sendMessage", status=500, count=2)
    with pytest.raises(Forbidden, match="(?i)blocked by the user"):
        await bot.send_message(chat_id=1, text="a")
    with pytest.raises(BadRequest, match="(?i)chat not found"):
        await bot.send_message(chat_id=1, text="b")
    for _ in range(2):
        with pytest.raises(NetworkError):
            await bot.send_message(chat_id=1, text="c")
    assert await bot.send_message(chat_id=1, text="d")
    assert [c.status for c in fake.calls if c.method == "sendMessage"] == [
        403,
        400,
        500,
        500,
        200,
    ]


async def test_reject_entities_once_gives_bad_request(fake: FakeTelegram, bot: Bot) -> None:
    fake.reject_entities_once()
    # without a parse mode the rejection is not used up
    assert await bot.send_message(chat_id=1, text="plain")
    with pytest.raises(BadRequest, match="(?i)can't parse entities"):
        await bot.send_message(chat_id=1, text="*fine*", parse_mode=ParseMode.MARKDOWN_V2)
    sent = await bot.send_message(chat_id=1, text="*fine*", parse_mode=ParseMode.MARKDOWN_V2)
    assert sent.text == "fine"


async def test_markup_is_validated_like_telegram(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match="(?i)Can't find end tag"):
        await bot.send_message(chat_id=1, text="<b>open", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match="(?i)Unsupported start tag"):
        await bot.send_message(chat_id=1, text="1 <3 you", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match="(?i)Character '.' is reserved"):
        await bot.send_message(chat_id=1, text="Done.", parse_mode=ParseMode.MARKDOWN_V2)
    escaped = await bot.send_message(
        chat_id=1, text="Done\\. *bold* [link](http://x.y/z)", parse_mode=ParseMode.MARKDOWN_V2
    )
    assert escaped.text == "Done. bold link"
    fake.validate_markup = False
    assert await bot.send_message(chat_id=1, text="Done.", parse_mode=ParseMode.MARKDOWN_V2)


async def test_html_becomes_text_and_entities_like_telegram(bot: Bot) -> None:
    sent = await bot.send_message(
        chat_id=1,
        text='<b><i>very</i></b> &copy; &lt;3 <a href="https://x.y/a_(b)">link</a>\n'
        '<pre><code class="language-python">x = 1</code></pre>\n<blockquote>quoted</blockquote>',
        parse_mode=ParseMode.HTML,
    )
    assert sent.text == "very &copy; <3 link\nx = 1\nquoted"  # only four named references
    found = {(e.type, sent.parse_entity(e)) for e in sent.entities}
    assert found == {
        ("bold", "very"),
        ("italic", "very"),
        ("text_link", "link"),
        ("pre", "x = 1"),
        ("blockquote", "quoted"),
    }
    [link] = [e for e in sent.entities if e.type == "text_link"]
    [pre] = [e for e in sent.entities if e.type == "pre"]
    assert (link.url, pre.language) == ("https://x.y/a_(b)", "python")


async def test_entities_telegram_cannot_nest_are_dropped_not_refused(bot: Bot) -> None:
    sent = await bot.send_message(
        chat_id=1,
        text='<code><b>x</b></code> <a href="https://x.y"><code>y</code></a> '
        "<blockquote>a<blockquote>b</blockquote></blockquote> "
        '<a href="javascript:alert(1)">z</a>',
        parse_mode=ParseMode.HTML,
    )
    assert sent.text == "x y ab z"
    assert [(e.type, sent.parse_entity(e)) for e in sent.entities] == [
        ("code", "x"),
        ("text_link", "y"),
        ("blockquote", "ab"),
    ]


async def test_edit_errors_match_telegram(fake: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(chat_id=3, text="same")
    with pytest.raises(BadRequest, match="(?i)message is not modified"):
        await bot.edit_message_text("same", chat_id=3, message_id=sent.message_id)
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        await bot.edit_message_text("x", chat_id=3, message_id=404)
    user = fake.send_user_message(chat_id=3, text="mine")
    with pytest.raises(BadRequest, match="(?i)can't be edited"):
        await bot.edit_message_text("x", chat_id=3, message_id=user["message"]["message_id"])
    edited = await bot.edit_message_text("changed", chat_id=3, message_id=sent.message_id)
    assert not isinstance(edited, bool) and edited.edit_date is not None
    assert await bot.delete_message(chat_id=3, message_id=sent.message_id)
    with pytest.raises(BadRequest, match="(?i)message to delete not found"):
        await bot.delete_message(chat_id=3, message_id=sent.message_id)
    assert fake.deleted_messages == [(3, sent.message_id)]


async def test_fail_ratio_hits_api_calls_but_not_polling(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_ratio = 1.0
    with pytest.raises(NetworkError, match="(?i)Internal Server Error"):
        await bot.send_message(chat_id=1, text="x")
    assert await bot.get_updates(timeout=0) == ()

    fake.fail_ratio = 0.5
    outcomes = []
    for _ in range(20):
        try:
            await bot.send_chat_action(chat_id=1, action="typing")
            outcomes.append(True)
        except NetworkError:
            outcomes.append(False)
    assert True in outcomes and False in outcomes
    # the same seed gives the same sequence
    replay = FakeTelegram(seed=fake.seed)
    replay.rng.random()  # the first sendMessage under fail_ratio=1.0
    assert [replay.rng.random() >= 0.5 for _ in range(20)] == outcomes


async def test_delay_and_garbage_faults(fake: FakeTelegram) -> None:
    request = HTTPXRequest(read_timeout=0.2)
    async with Bot(TOKEN, base_url=fake.base_url, request=request) as bot:
        fake.delay_next("sendMessage", 30)
        with pytest.raises(TimedOut):
            await bot.send_message(chat_id=1, text="slow")
        fake.garble_next("getMe")
        with pytest.raises(TelegramError, match="(?i)Invalid server response"):
            await bot.get_me()


async def test_blocked_chat_and_rate_limit(fake: FakeTelegram, bot: Bot) -> None:
    fake.blocked_chats.add(66)
    with pytest.raises(Forbidden, match="(?i)bot was blocked by the user"):
        await bot.send_message(chat_id=66, text="hi")
    fake.per_chat_limit = (2, 60.0)
    await bot.send_message(chat_id=67, text="1")
    await bot.send_message(chat_id=67, text="2")
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(chat_id=67, text="3")
    retry_after = caught.value.retry_after
    assert isinstance(retry_after, dtm.timedelta)
    assert dtm.timedelta(seconds=1) <= retry_after <= dtm.timedelta(seconds=60)
    assert await bot.send_message(chat_id=68, text="other chat")


async def test_wait_for_sent_times_out_with_recent_calls(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_chat_action(chat_id=1, action="typing")
    with pytest.raises(TimeoutError) as caught:
        await fake.wait_for_sent(chat_id=1, timeout=0.1)
    message = str(caught.value)
    assert "sendMessage" in message and "sendChatAction -> 200" in message


async def test_wait_for_call_sees_calls_made_while_waiting(fake: FakeTelegram, bot: Bot) -> None:
    waiter = asyncio.create_task(
        fake.wait_for_call(lambda c: c.method == "sendMessage" and c.text == "later")
    )
    await bot.send_message(chat_id=1, text="sooner")
    await bot.send_message(chat_id=1, text="later")
    call = await asyncio.wait_for(waiter, 5)
    assert isinstance(call, Call) and call.result["text"] == "later"


async def test_custom_responder_overrides_and_extends(fake: FakeTelegram, bot: Bot) -> None:
    def set_description(call: Call) -> bool:
        if not call.params.get("description"):
            raise ApiError(400, "Bad Request: description is empty")
        return True

    fake.responders["setmydescription"] = set_description
    assert await bot.set_my_description("A friendly companion")
    with pytest.raises(BadRequest, match="(?i)description is empty"):
        await bot.set_my_description("")


# --------------------------------------------------------------------------- files


async def test_send_document_multipart_is_decoded(fake: FakeTelegram, bot: Bot) -> None:
    message = await bot.send_document(
        chat_id=9,
        document=b"line one\nline two\n",
        filename="notes.txt",
        caption="<i>my notes</i>",
        parse_mode=ParseMode.HTML,
    )
    [call] = fake.sent("sendDocument", chat_id=9)
    assert call.files["document"] == ("notes.txt", b"line one\nline two\n")
    assert call.params["chat_id"] == 9
    assert call.params["caption"] == "<i>my notes</i>"
    assert message.document is not None
    assert message.document.file_name == "notes.txt"
    assert message.document.mime_type == "text/plain"
    assert message.caption == "my notes"

    # the uploaded bytes can be fetched back through getFile and the file URL
    file = await bot.get_file(message.document.file_id)
    assert bytes(await file.download_as_bytearray()) == b"line one\nline two\n"


async def test_user_media_can_be_downloaded(fake: FakeTelegram, bot: Bot) -> None:
    update = Update.de_json(
        fake.message_update(chat_id=5, voice=True, photo=True, caption="look", update_id=1), bot
    )
    assert update.message is not None and update.message.voice is not None
    assert update.message.caption == "look"
    assert len(update.message.photo) == 2
    fake.add_file(update.message.voice.file_id, b"OggS custom")
    voice = await bot.get_file(update.message.voice.file_id)
    assert bytes(await voice.download_as_bytearray()) == b"OggS custom"
    with pytest.raises(BadRequest, match="(?i)invalid file_id"):
        await bot.get_file("nope")


# --------------------------------------------------------------------------- update builders


async def test_message_update_builds_realistic_forum_and_mentions(
    fake: FakeTelegram, bot: Bot
) -> None:
    text = "👋🏽 hey @Companion_Bot, how are you?"
    entities = fake.mention_entity(text)
    raw = fake.message_update(
        chat_id=-100777,
        chat_type="supergroup",
        chat_title="Forum",
        text=text,
        entities=entities,
        message_thread_id=12,
        is_topic_message=True,
        update_id=50,
    )
    update = Update.de_json(raw, bot)
    message = update.message
    assert message is not None
    assert message.chat.is_forum is True and message.chat.title == "Forum"
    assert message.is_topic_message is True and message.message_thread_id == 12
    assert message.reply_to_message is not None
    assert message.reply_to_message.forum_topic_created is not None
    # offsets are in UTF-16 units, so PTB extracts exactly the mention
    assert message.parse_entities([MessageEntity.MENTION]) == {
        MessageEntity("mention", entities[0]["offset"], entities[0]["length"]): "@Companion_Bot"
    }
    with pytest.raises(ValueError):
        fake.mention_entity("no mention here")

    command = Update.de_json(fake.message_update(chat_id=1, text="/help me", update_id=51), bot)
    assert command.message is not None
    # in a private chat the chat id is the user's id
    assert command.message.from_user is not None and command.message.from_user.id == 1
    assert command.message.parse_entities(["bot_command"]) == {
        MessageEntity("bot_command", 0, 5): "/help"
    }


# --------------------------------------------------------------------------- other methods


async def test_commands_reactions_drafts_and_chats(fake: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_my_commands([BotCommand("start", "Begin"), BotCommand("forget", "Wipe")])
    assert [c.command for c in await bot.get_my_commands()] == ["start", "forget"]
    with pytest.raises(BadRequest, match="(?i)BOT_COMMAND_INVALID"):
        await bot.set_my_commands([BotCommand("Start", "Upper case is invalid")])
    assert await bot.delete_my_commands()
    assert await bot.get_my_commands() == ()

    user = fake.send_user_message(chat_id=8, text="react to me")
    message_id = user["message"]["message_id"]
    assert await bot.set_message_reaction(8, message_id, ReactionTypeEmoji("👍"))
    assert fake.reactions[(8, message_id)] == [{"type": "emoji", "emoji": "👍"}]
    with pytest.raises(BadRequest, match="(?i)REACTION_INVALID"):
        await bot.set_message_reaction(8, message_id, ReactionTypeEmoji("🦷"))

    assert await bot.send_message_draft(chat_id=8, draft_id=1, text="Thinking")
    [draft] = fake.sent("sendMessageDraft")
    assert draft.params == {"chat_id": 8, "draft_id": 1, "text": "Thinking"}
    with pytest.raises(BadRequest):
        await bot.send_message_draft(chat_id=-100777, draft_id=1, text="group")

    fake.add_chat({"id": -100777, "type": "supergroup", "title": "Forum", "is_forum": True})
    chat = await bot.get_chat(-100777)
    assert chat.is_forum is True and chat.title == "Forum"
    member = await bot.get_chat_member(-100777, fake.bot_id)
    assert member.status == "member" and member.user.id == fake.bot_id
    assert await bot.leave_chat(-100777)
    assert fake.left_chats == [-100777]


# --------------------------------------------------------------------------- webhooks


async def test_webhook_registration_and_delivery(fake: FakeTelegram, bot: Bot) -> None:
    received: list[dict[str, Any]] = []

    async def hook(request: web.Request) -> web.Response:
        if request.headers.get("X-Telegram-Bot-Api-Secret-Token") != "s3cret":
            return web.Response(status=403)
        received.append(await request.json())
        return web.Response()

    receiver = web.Application()
    receiver.router.add_post("/hook", hook)
    runner = web.AppRunner(receiver)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    try:
        assert await bot.set_webhook(url, secret_token="s3cret")
        assert fake.webhook is not None and fake.webhook["secret_token"] == "s3cret"
        assert (await bot.get_webhook_info()).url == url
        with pytest.raises(Conflict, match="(?i)webhook is active"):
            await bot.get_updates(timeout=0)

        update = fake.message_update(chat_id=1, text="via webhook")
        assert await fake.post_webhook(update) == 200
        assert received[0]["message"]["text"] == "via webhook"
        assert received[0]["update_id"] == update["update_id"]
        assert await fake.post_webhook(fake.message_update(chat_id=1, text="x"), "bad") == 403
        assert await fake.post_webhook(fake.message_update(chat_id=1, text="y"), None) == 403
        assert len(received) == 1

        assert await bot.delete_webhook()
        assert fake.webhook is None
        assert (await bot.get_webhook_info()).url == ""
    finally:
        await runner.cleanup()
