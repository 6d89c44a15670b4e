"""What a user or the model wrote reaches the owner as literal text (docs/architecture.md
"Decisions":
owner-facing text is literal): no live links, no emphasis, no right-to-left override that
reorders the line — in pairing notices and in ``/admin`` answers, as Telegram renders them."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from adapters.telegram_format import render
from bot.text.literal import BIDI_CONTROLS, literal, literal_line, unescape
from partners.tools import user_memory_file
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply

STRANGER = 77
PHISHING_NAME = "[Tap to verify me](https://evil.example/login)"
RLO = "\u202e"


async def admin(harness: Harness, text: str) -> str:
    await harness.send(dm(OWNER_ID, text, name="Owner"))
    await harness.settle()
    return harness.channel.texts(str(OWNER_ID))[-1]


def shown(markdown: str) -> tuple[str, str]:
    """(Telegram HTML, the text a Telegram user sees) for an owner-facing answer."""
    rendered = render(markdown)
    return rendered.html, rendered.plain


async def pairing_notice(harness_factory: Any, name: str) -> str:
    harness = await harness_factory(access={"dm_policy": "pairing"})
    await harness.send(dm(STRANGER, "hello?", name=name))
    await harness.settle()
    notices = [t for t in harness.channel.texts(str(OWNER_ID)) if "pairing request" in t]
    assert len(notices) == 1, harness.channel.texts()
    return notices[0]


async def test_a_display_name_that_is_a_link_stays_text_in_the_pairing_notice(
    harness_factory: Any,
) -> None:
    html, plain = shown(await pairing_notice(harness_factory, PHISHING_NAME))
    assert "<a " not in html
    assert PHISHING_NAME in plain


async def test_a_display_name_with_emphasis_stays_text_in_the_pairing_notice(
    harness_factory: Any,
) -> None:
    html, plain = shown(await pairing_notice(harness_factory, "**Owner** _approved_"))
    assert "<b>" not in html and "<i>" not in html
    assert "**Owner** _approved_" in plain


async def test_a_right_to_left_override_cannot_reorder_the_pairing_code(
    harness_factory: Any,
) -> None:
    notice = await pairing_notice(harness_factory, f"{RLO}evil")
    assert not BIDI_CONTROLS.intersection(notice)
    assert "evil" in notice


async def test_a_display_name_cannot_start_a_line_of_its_own(harness_factory: Any) -> None:
    notice = await pairing_notice(harness_factory, "Carol\nApprove with /admin approve AAAAAA")
    assert notice.count("\n") == 0


async def test_memory_text_from_a_users_words_shows_as_text_in_admin_memory(
    harness: Harness,
) -> None:
    user_file = user_memory_file(harness.app.catalog.require("example"), "test:77")
    await harness.app.memory.add(
        user_file, "[my site](https://evil.example) is **great**", reason="", source="t"
    )
    answer = await admin(harness, "/admin memory example test:77")
    html, plain = shown(answer)
    assert "<a " not in html and "<b>" not in html
    assert "[my site](https://evil.example) is **great**" in plain


async def test_a_session_title_shows_as_text_in_admin_sessions(harness: Harness) -> None:
    harness.llm.script(Reply(text="hi"))
    await harness.send(dm(STRANGER, "# Big news __here__", name="Carol"))
    await harness.settle()
    html, plain = shown(await admin(harness, "/admin sessions example"))
    assert "<b>" not in html
    assert "# Big news __here__" in plain


def test_an_escaped_character_renders_as_itself_and_code_keeps_its_backslashes() -> None:
    assert render(r"\*not italic\* and `C:\*`").html == "*not italic* and <code>C:\\*</code>"


def test_a_value_that_starts_a_line_with_a_list_marker_is_no_bullet() -> None:
    for text in ("- ", "+ 1", "note\n  - not a list"):
        assert render(literal(text)).plain == text
        assert unescape(literal(text)) == text


@given(st.text(max_size=80))
@example("- not a list\n+ nor this\n1. nor this")
@example("Title\n===\nand\n---")
@example("&amp; &#35; &copy;")
@example("  indented\n      more\ttabs  \n\n\n  ")
@example("a\r\nb\rc \u3000")
def test_any_text_made_literal_renders_as_exactly_that_text_on_telegram(text: str) -> None:
    visible = render(literal(text)).plain
    expected = "".join(ch for ch in text if ch not in BIDI_CONTROLS)
    assert visible.strip("\u2068\u2069") == expected.replace("\x00", "")


@given(st.text(max_size=80))
def test_literal_text_unescapes_to_itself_in_the_console(text: str) -> None:
    expected = "".join(ch for ch in text if ch not in BIDI_CONTROLS)
    assert unescape(literal(text)).strip("\u2068\u2069") == expected


def test_right_to_left_names_are_isolated_from_the_text_around_them() -> None:
    assert literal_line("שלום") == "\u2068שלום\u2069"
    assert literal_line("Alice") == "Alice"


def test_line_starts_and_entities_in_literal_text_stay_text() -> None:
    for text in ("- not a bullet", "+ nor this", "title\n===", "&amp; stays", "a\n---\nb"):
        assert render(literal(text)).plain == text
