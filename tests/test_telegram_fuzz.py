"""Generated input for the Telegram channel: update payloads of every shape (odd entities,
names, topics, buttons, media, bots, channels) and arbitrary Markdown.

* every payload converts to an event without an exception, and a DM is always addressed;
* a few hundred of them, pushed through the fake Bot API into a running gateway, are handled
  without an error at the per-update edge, and the gateway still answers afterwards;
* any Markdown renders to HTML Telegram accepts, and splits into chunks that fit (Telegram's
  visible text, Discord's Markdown) and show every character with the formatting it had.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from telegram import Update

from adapters import chunking
from adapters.telegram_format import render, split, utf16_len
from adapters.telegram_updates import BotIdentity, update_event
from bot.events import Inbound, Unsupported
from bot.gateway.addressing import named_partner, read_group
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.telegram_html import parse_html
from tests.telegram_harness import BOT_USERNAME, GROUP, TelegramGateways, settled

BOT_ID = 999
ME = BotIdentity(BOT_ID, BOT_USERNAME)


@dataclass(frozen=True)
class Bound:
    id: str
    name: str


PARTNERS = [Bound("example", "Mira"), Bound("sol", "Sol")]
ENTITY_TYPES = ["mention", "text_mention", "bot_command", "bold", "url", "hashtag", "code"]

names = st.one_of(
    st.sampled_from(["Alice", "Bob", "Mira", "Sol", "Ünïcödé", "😀", "<b>", "A" * 64]),
    st.text(min_size=1, max_size=8),
)
handles = st.sampled_from(["alice", "bob_99", BOT_USERNAME, "other_bot"])
words = st.one_of(
    st.text(min_size=1, max_size=60),
    st.sampled_from(
        [
            "/start",
            "/help",
            "/partner sol",
            "/new",
            "/admin",
            f"@{BOT_USERNAME} hi",
            "Mira, hello",
            "sol?",
            "/start@other_bot",
            "**bold** `code`",
            "😀" * 3,
            "",
        ]
    ),
)
user_ids = st.sampled_from([501, 502, 503, 7001, BOT_ID])


@st.composite
def users(draw: st.DrawFn) -> dict[str, Any]:
    user_id = draw(user_ids)
    is_bot = user_id == BOT_ID or draw(st.sampled_from([False, False, False, True]))
    user: dict[str, Any] = {"id": user_id, "is_bot": is_bot}
    user["first_name"] = draw(names)
    if draw(st.booleans()):
        user["username"] = draw(handles)
    return user


@st.composite
def chats(draw: st.DrawFn, user: dict[str, Any]) -> dict[str, Any]:
    kind = draw(st.sampled_from(["private", "private", "group", "supergroup", "channel"]))
    if kind == "private":
        return {"id": user["id"], "type": "private", "first_name": user["first_name"]}
    chat: dict[str, Any] = {"id": draw(st.sampled_from([GROUP, -4001])), "type": kind}
    chat["title"] = draw(names)
    if kind == "supergroup" and draw(st.booleans()):
        chat["is_forum"] = True
    return chat


@st.composite
def entities(draw: st.DrawFn) -> list[dict[str, Any]]:
    found = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(ENTITY_TYPES))
        entity: dict[str, Any] = {
            "type": kind,
            "offset": draw(st.integers(0, 70)),
            "length": draw(st.integers(0, 70)),
        }
        if kind == "text_mention":
            entity["user"] = draw(users())
        found.append(entity)
    return found


STICKER = {
    "file_id": "s1",
    "file_unique_id": "u1",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
}


@st.composite
def messages(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    user = draw(users())
    chat = draw(chats(user))
    message: dict[str, Any] = {
        "message_id": draw(st.integers(1, 10_000)),
        "date": draw(st.integers(1_600_000_000, 1_900_000_000)),
        "chat": chat,
    }
    if chat["type"] != "channel" or draw(st.booleans()):
        message["from"] = user
    body = draw(st.sampled_from(["text", "text", "caption", "sticker", "nothing"]))
    if body == "text":
        message["text"] = draw(words)
        message["entities"] = draw(entities())
    elif body == "caption":
        message["caption"] = draw(words)
        message["caption_entities"] = draw(entities())
        message["photo"] = [{"file_id": "p1", "file_unique_id": "pu1", "width": 9, "height": 9}]
    elif body == "sticker":
        message["sticker"] = STICKER
    if chat.get("is_forum") and draw(st.booleans()):
        message["message_thread_id"] = draw(st.sampled_from([1, 10, 20]))
        message["is_topic_message"] = draw(st.booleans())
    if depth == 0 and draw(st.integers(0, 3)) == 0:
        replied = draw(messages(depth=1))
        replied["chat"] = chat
        if draw(st.booleans()):
            replied["forum_topic_created"] = {"name": "Topic", "icon_color": 7322096}
        message["reply_to_message"] = replied
    return message


@st.composite
def callback_queries(draw: st.DrawFn) -> dict[str, Any]:
    query: dict[str, Any] = {
        "id": str(draw(st.integers(0, 10**6))),
        "from": draw(users()),
        "chat_instance": "ci",
    }
    if draw(st.booleans()):
        query["data"] = draw(words)
    if draw(st.integers(0, 4)):
        query["message"] = draw(messages(depth=1))
    return query


@st.composite
def update_payloads(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["message", "message", "message", "callback_query", "edited"]))
    if kind == "callback_query":
        return {"callback_query": draw(callback_queries())}
    message = draw(messages())
    if kind == "edited":
        message["edit_date"] = message["date"]
        return {"edited_message": message}
    return {"channel_post" if message["chat"]["type"] == "channel" else "message": message}


# ---- conversion --------------------------------------------------------------------------


@settings(max_examples=2000, deadline=None, database=None)
@given(update_payloads())
def test_any_update_converts_to_an_event_without_error(payload: dict[str, Any]) -> None:
    update = Update.de_json({"update_id": 1, **payload}, None)
    event = update_event(update, ME)
    if event is not None:
        assert event.update_id == "1"  # what the gateway handles each update once by
    if isinstance(event, Inbound):
        # a voice note or photo may come without a caption: its media is what it says
        assert (event.text or event.media is not None) and event.chat.platform == "telegram"
        assert event.sender.user_id != str(BOT_ID)  # never our own messages: no loops
        # and the gateway reads any of them: a partner named is the one addressed
        reading = read_group(event, PARTNERS, BOT_USERNAME)
        named = named_partner(event.text, PARTNERS)
        assert reading.partner_id in {"example", "sol"}
        if named is not None:
            assert reading.partner_id == named and reading.addressed
    elif isinstance(event, Unsupported):
        assert event.chat.platform == "telegram"


# ---- the receive path ----------------------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(bot_username=BOT_USERNAME, bot_id=BOT_ID) as tg:
        tg.validate_markup = True
        yield tg


async def test_generated_updates_pass_the_receive_path_without_errors(
    fake: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    payloads: list[dict[str, Any]] = []

    # derandomize: the same updates on every run. How many of them get an answer depends on
    # the draw, so the proof that the gateway kept answering is a few known updates pushed
    # between them, each of which must be answered.
    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(update_payloads())
    def collect(payload: dict[str, Any]) -> None:
        # Hypothesis repeats small values (message id 1): give each update its own ids so
        # they are not all dropped as duplicates of one another.
        for message in (payload.get("message"), payload.get("edited_message")):
            if message is not None:
                message["message_id"] = 20_000 + len(payloads)
        if "callback_query" in payload:
            payload["callback_query"]["id"] = f"q{len(payloads)}"
        payloads.append(payload)

    collect()
    gateways = TelegramGateways(fake, fake_llm, tmp_path / "data")
    gateways.add_partner("sol", "Sol")
    try:
        gateway = await gateways.start()
        await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
        await gateway.app.store.bind("telegram", str(GROUP), "sol", "command")
        sentinels: list[int] = []
        with caplog.at_level(logging.ERROR, logger="adapters"):
            for index, payload in enumerate(payloads):
                fake.push_update(payload)
                if index % 50 == 49:
                    sentinels.extend(_push_sentinels(fake, SENTINEL_CHATS + index))
            await settled(fake, gateway)
        errors = [r for r in caplog.records if r.name.startswith("adapters")]
        assert [r.getMessage() for r in errors if r.levelno >= logging.ERROR] == []
        assert gateway.app.dispatcher.turns_failed == 0
        # not vacuous: a /help typed and one pressed as a button, each in a chat of its own
        # (two in one chat may be answered as one), between the generated updates
        assert [len(fake.sent("sendMessage", chat)) for chat in sentinels] == [1] * len(sentinels)
        pressed = [f"press{chat}" for chat in sentinels[1::2]]
        assert set(pressed) <= set(fake.answered_callback_queries)
    finally:
        await gateways.stop_all()


SENTINEL_CHATS = 60_000


def _push_sentinels(fake: FakeTelegram, chat: int) -> tuple[int, int]:
    """A user's /help, and another's press of a /help button; returns their two chats."""
    fake.send_user_message(chat_id=chat, user_id=chat, text="/help", first_name="Typed")
    pressed = chat + 1_000
    press = fake.callback_query_update(
        chat_id=pressed,
        user_id=pressed,
        data="/help",
        message_id=1,
        callback_query_id=f"press{pressed}",
    )
    fake.push_update(press)
    return chat, pressed


# ---- formatting ----------------------------------------------------------------------------

markdown = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(
            [
                "**",
                "*",
                "***",
                "_",
                "__",
                "`",
                "``",
                "```",
                "```python\n",
                "\n```\n",
                "~~",
                "[a](https://x.y)",
                "[b c](https://x.y/a_(b))",
                "[b](javascript:x)",
                "](",
                "# ",
                "## ",
                "- ",
                "1. ",
                "> ",
                "| a | b |\n|---|---:|\n",
                "| 1 | 22 |\n",
                "---\n",
                "<b>",
                "&amp;",
                "\\*",
                "<",
                ">",
                "&",
                "\n",
                "\n\n",
                "  \n",
                " ",
                "    ",
                "\t",
                "word",
                "longer words here",
                "😀",
                "👍🏽",
                "中文。",
                "Ünïcödé",
                ".",
                "!",
            ]
        ),
        max_size=80,
    ).map("".join),
)


def styled(rendered_html: str) -> list[tuple[str, frozenset[str]]]:
    """Each visible character of a message Telegram accepts (``parse_html`` raises like
    Telegram otherwise), with the formatting on it; whitespace left out, since a cut may
    fall on it."""
    text, entities = parse_html(rendered_html)
    units: list[tuple[str, set[str]]] = []
    for char in text:
        units.extend((char if i == 0 else "", set()) for i in range(utf16_len(char)))
    for entity in entities:
        style = f"{entity['type']}:{entity.get('url', '')}"
        for unit in units[entity["offset"] : entity["offset"] + entity["length"]]:
            unit[1].add(style)
    return [(char, frozenset(styles)) for char, styles in units if char and not char.isspace()]


@settings(max_examples=1500, deadline=None, database=None)
@given(markdown)
def test_any_markdown_renders_to_html_telegram_accepts(text: str) -> None:
    rendered = render(text)
    visible, _ = parse_html(rendered.html)  # raises like Telegram on HTML it would refuse
    assert visible == rendered.plain


# Limits from 50: ten nested list markers ("• " each, markdown-it nests no deeper) and one
# character must fit in a message; real limits are 2000 and 4032.
LIMITS = st.integers(min_value=50, max_value=200)


@settings(max_examples=1500, deadline=None, database=None)
@given(markdown, LIMITS)
# a list cut inside its last item, then a list with another marker: the cut part must not
# swallow the empty item as paragraph text
@example("- 0000000000000000000000000000000000000\n0\n0\n0\n+", 50)
def test_any_markdown_splits_into_chunks_that_fit_and_lose_nothing(text: str, limit: int) -> None:
    chunks = split(text, limit)
    assert all(utf16_len(render(chunk).plain) <= limit for chunk in chunks)
    whole = styled(render(text).html)
    pieces = [unit for chunk in chunks for unit in styled(render(chunk).html)]
    if "|" in text:  # a table cut between rows repeats its header, lined up anew
        rules = set("|-+")
        remaining = iter(char for char, _ in pieces if char not in rules)
        assert all(char in remaining for char, _ in whole if char not in rules)
    else:  # every character is there once, with the formatting it had
        assert pieces == whole


@settings(max_examples=1000, deadline=None, database=None)
@given(markdown, LIMITS)
# a heading cut after " #": the first part must not end in a closing sequence that hides it
@example("## " + "0" * 44 + " # 0000", 50)
def test_discord_chunks_fit_as_markdown_and_show_the_same_text(text: str, limit: int) -> None:
    chunks = chunking.split(text, limit)
    assert all(utf16_len(chunk) <= limit for chunk in chunks)
    rules = set("|-+")  # a table's rules are lined up anew in each chunk
    whole = [char for char, _ in styled(render(text).html) if char not in rules]
    shown = iter(c for chunk in chunks for c, _ in styled(render(chunk).html) if c not in rules)
    assert all(char in shown for char in whole)
