"""The boundary types: what a platform hands in is storable text, whatever it was."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.events import Attachment, ChatRef, Inbound, Sender, storable


def test_inbound_texts_lose_their_lone_surrogates_as_they_cross_the_boundary() -> None:
    chat = ChatRef("telegram", "-100", "group", thread_id="7", title="Tea \ud83d club")
    sender = Sender("telegram", "42", "Ann\udce9", "ann\ud800")
    inbound = Inbound(
        chat,
        sender,
        "9",
        "caption \ud83d",
        datetime.now(UTC),
        replied_as="mira\udfff",
        reply_to_message_id="8",
        attachment=Attachment("notes\ud83d.txt", "file-1", 12),
        file_names=("a\ud83d.zip",),
    )
    assert chat.title == "Tea \ufffd club"
    assert (sender.display_name, sender.username) == ("Ann\ufffd", "ann\ufffd")
    assert inbound.text == "caption \ufffd"
    assert inbound.replied_as == "mira\ufffd"
    assert inbound.file_names == ("a\ufffd.zip",)
    assert inbound.attachment == Attachment("notes\ufffd.txt", "file-1", 12)
    texts = [chat.title, sender.display_name, sender.username, inbound.text, "notes\ufffd.txt"]
    for text in texts:
        assert text is not None
        text.encode("utf-8")  # what the store does with it


def test_a_surrogate_pair_becomes_its_character_and_clean_text_is_untouched() -> None:
    assert storable("smile \ud83d\ude00") == "smile \U0001f600"
    assert storable("\ude00\ud83d") == "\ufffd\ufffd"  # the wrong way round: two halves
    text = "plain 东京 text"
    assert storable(text) is text
