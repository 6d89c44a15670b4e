"""The model's Markdown as a Telegram user sees it: each reply goes through the Telegram
channel's own split and send, on the real python-telegram-bot, to the fake Bot API, which
parses the HTML into text and entities as Telegram does (``tests/fakes/telegram_html.py``).

One table of inputs for formatting (nested emphasis, links with parentheses, quotes, code,
tables, raw HTML) and one for replies longer than a message, where each message must carry
its own formatting: no literal ``**`` where a cut fell inside bold, no link or emoji cut in
half.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.telegram_channel import TelegramChannel
from bot.config.platforms import TelegramConfig
from bot.events import ChatRef, Outbound
from tests.fakes.fake_telegram import TOKEN, FakeTelegram, utf16_len

CHAT = ChatRef("telegram", "501", "dm")
MAX_MESSAGE = 4096
WIKI = "https://en.wikipedia.org/wiki/Python_(programming_language)"


@dataclass(frozen=True)
class Shown:
    """One message as Telegram holds it: its text and its entities as (type, text, detail)."""

    text: str
    entities: frozenset[tuple[str, str, str]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server  # validate_markup is on: a message Telegram would refuse fails


@pytest.fixture
async def channel(fake: FakeTelegram) -> AsyncIterator[TelegramChannel]:
    config = TelegramConfig.model_validate({"token": TOKEN, "base_url": fake.base_url})
    channel = TelegramChannel(config)
    yield channel
    await channel.bot.shutdown()


def _entity_text(text: str, entity: dict[str, Any]) -> str:
    encoded = text.encode("utf-16-le")
    start, length = entity["offset"] * 2, entity["length"] * 2
    return encoded[start : start + length].decode("utf-16-le")


async def deliver(fake: FakeTelegram, channel: TelegramChannel, markdown: str) -> list[Shown]:
    """Send a reply the way the gateway does (split, then one send per chunk); return what
    Telegram shows for each message."""
    before = len(fake.sent(chat_id=int(CHAT.chat_id)))
    for chunk in channel.split(markdown):
        await channel.send(Outbound(CHAT, chunk))
    calls = fake.sent(chat_id=int(CHAT.chat_id))[before:]
    assert all(call.ok for call in calls), [call.description for call in calls]
    assert all(call.params.get("parse_mode") == "HTML" for call in calls), "fell back to plain"
    shown = []
    for call in calls:
        text = call.result["text"]
        entities = frozenset(
            (e["type"], _entity_text(text, e), e.get("url") or e.get("language") or "")
            for e in call.result.get("entities", [])
        )
        shown.append(Shown(text, entities))
    return shown


FORMATTING = [
    pytest.param(
        "This is ***very*** good",
        "This is very good",
        {("bold", "very", ""), ("italic", "very", "")},
        id="nested-emphasis",
    ),
    pytest.param(
        "**bold and _italic inside_** then *only italic*",
        "bold and italic inside then only italic",
        {("bold", "bold and italic inside", ""), ("italic", "italic inside", "")}
        | {("italic", "only italic", "")},
        id="emphasis-inside-emphasis",
    ),
    pytest.param(
        f"Read [the article]({WIKI}) first.",
        "Read the article first.",
        {("text_link", "the article", WIKI)},
        id="link-with-parentheses",
    ),
    pytest.param(
        "[**bold** link](https://example.com/a?b=1&c=2)",
        "bold link",
        {("text_link", "bold link", "https://example.com/a?b=1&c=2"), ("bold", "bold", "")},
        id="formatted-link",
    ),
    pytest.param(
        "> She said *this*\n> and that.\n\nThen I left.",
        "She said this\nand that.\n\nThen I left.",
        {("blockquote", "She said this\nand that.", ""), ("italic", "this", "")},
        id="blockquote",
    ),
    pytest.param(
        "```python\nif a < b and c > d:\n    print('&')\n```",
        "if a < b and c > d:\n    print('&')",
        {("pre", "if a < b and c > d:\n    print('&')", "python")},
        id="fenced-code-with-language",
    ),
    pytest.param(
        "Use `a <b> c` and `**not bold**`.",
        "Use a <b> c and **not bold**.",
        {("code", "a <b> c", ""), ("code", "**not bold**", "")},
        id="inline-code",
    ),
    pytest.param(
        "| Film | Year |\n|------|-----:|\n| Alien | 1979 |\n| Up | 2009 |",
        "Film  | Year\n------+-----\nAlien | 1979\nUp    | 2009",
        {("pre", "Film  | Year\n------+-----\nAlien | 1979\nUp    | 2009", "")},
        id="table-as-preformatted-text",
    ),
    pytest.param(
        "## Plan\n\n- tea\n- a *walk*\n\n1. first\n2. second",
        "Plan\n\n• tea\n• a walk\n\n1. first\n2. second",
        {("bold", "Plan", ""), ("italic", "walk", "")},
        id="heading-and-lists",
    ),
    pytest.param(
        "1. Install:\n\n   ```sh\n   pip install x\n     --upgrade\n   ```\n2. Run it.",
        "1. Install:\n\npip install x\n  --upgrade\n\n2. Run it.",
        {("pre", "pip install x\n  --upgrade", "sh")},
        id="code-block-in-a-list-item",
    ),
    pytest.param(
        "<b>not bold</b> & <script>x</script> &amp;",
        "<b>not bold</b> & <script>x</script> &",
        set(),
        id="raw-html-is-text",
    ),
    pytest.param(
        "[click me](javascript:alert(1)) and [local](file:///etc/passwd)",
        "[click me](javascript:alert(1)) and [local](file:///etc/passwd)",
        set(),
        id="unsafe-links-are-text",
    ),
    pytest.param(
        r"\*not italic\* and ~~gone~~",
        "*not italic* and gone",
        {("strikethrough", "gone", "")},
        id="escapes-and-strikethrough",
    ),
]


@pytest.mark.parametrize(("markdown", "text", "entities"), FORMATTING)
async def test_markdown_reaches_telegram_as_the_formatting_it_means(
    fake: FakeTelegram,
    channel: TelegramChannel,
    markdown: str,
    text: str,
    entities: set[tuple[str, str, str]],
) -> None:
    [shown] = await deliver(fake, channel, markdown)
    assert shown.text == text
    assert shown.entities == entities


# ---- replies longer than one message -----------------------------------------------------

WORDS = " ".join(f"word{i}" for i in range(1400))  # about 10,000 characters


def _visible_words(messages: list[Shown]) -> list[str]:
    return " ".join(m.text for m in messages).split()


async def test_bold_across_a_cut_is_bold_in_both_messages(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    messages = await deliver(fake, channel, f"Listen: **{WORDS}** — done.")
    assert len(messages) >= 3
    assert all(utf16_len(m.text) <= MAX_MESSAGE for m in messages)
    assert all("**" not in m.text for m in messages)
    assert _visible_words(messages) == f"Listen: {WORDS} — done.".split()
    for message in messages:
        bold = " ".join(text for kind, text, _ in message.entities if kind == "bold")
        words = [w for w in message.text.split() if w.startswith("word")]
        assert words and all(w in bold.split() for w in words)


async def test_nested_emphasis_and_a_link_across_cuts_keep_their_formatting(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    long_link = f"[{WORDS[:3000]}](https://example.com/x_(y))"
    markdown = f"*Intro and ***{WORDS}*** and {long_link} end*"
    messages = await deliver(fake, channel, markdown)
    assert all(utf16_len(m.text) <= MAX_MESSAGE for m in messages)
    assert not any(marker in m.text for m in messages for marker in ("*", "](", "[word"))
    assert _visible_words(messages) == f"Intro and {WORDS} and {WORDS[:3000]} end".split()
    for message in messages:
        kinds = {kind for kind, _, _ in message.entities}
        assert "italic" in kinds  # the outer emphasis holds in every message
    links = [e for m in messages for e in m.entities if e[0] == "text_link"]
    assert links and all(url == "https://example.com/x_(y)" for _, _, url in links)
    assert " ".join(text for _, text, _ in links).split() == WORDS[:3000].split()


async def test_a_long_code_block_is_code_with_its_language_in_every_message(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    code = "\n".join(f"value_{i} = compute({i})  # <{i}> & more" for i in range(400))
    messages = await deliver(fake, channel, f"Here:\n\n```python\n{code}\n```\n\nThat's it.")
    pres = [e for m in messages for e in m.entities if e[0] == "pre"]
    assert len(pres) >= 3 and all(language == "python" for _, _, language in pres)
    assert "\n".join(text for _, text, _ in pres) == code
    assert not any("```" in m.text for m in messages)


@pytest.mark.parametrize("extra", [0, 1])
async def test_a_reply_at_the_limit_is_one_message_and_one_more_character_is_two(
    fake: FakeTelegram, channel: TelegramChannel, extra: int
) -> None:
    limit = len(channel.split("x" * 10_000)[0])  # the channel's own room per message
    first = "a" * (limit - 20)
    markdown = f"{first} **{'b' * (19 + extra)}**"
    assert utf16_len(markdown) - 4 == limit + extra  # visible length, without the ** pairs
    messages = await deliver(fake, channel, markdown)
    assert len(messages) == 1 + extra
    assert all(("bold", m.text.split()[-1], "") in m.entities for m in messages[-1:])


async def test_emoji_at_a_cut_stay_whole_and_count_as_telegram_counts(
    fake: FakeTelegram, channel: TelegramChannel
) -> None:
    markdown = "**" + "😀" * 5000 + "**"  # 10,000 UTF-16 units, no space to cut at
    messages = await deliver(fake, channel, markdown)
    assert len(messages) >= 3
    assert all(utf16_len(m.text) <= MAX_MESSAGE for m in messages)
    assert "".join(m.text for m in messages) == "😀" * 5000
    assert all(("bold", m.text, "") in m.entities for m in messages)
