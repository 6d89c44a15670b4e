"""Partners from the owner's DM: cards, create, clone, delete (with a confirmation step), show,
edit a file by sending documents back and forth, set preset.yml values, reload and export."""

from __future__ import annotations

import io
import json
import re
import tarfile

from bot.admin.partners import MAX_EDIT_BYTES
from bot.events import Attachment
from partners.memory import MemoryFile
from partners.memory_format import fingerprint
from tests.admin_support import admin, admin_messages, partner_dir, say
from tests.conftest import OWNER_ID, Harness


async def test_partner_cards_show_scope_chats_activity_and_tokens(harness: Harness) -> None:
    await harness.app.store.bind("test", "g1", "example", "command")
    await say(harness, 42, "hello there", "hi Alice")
    cards = await admin(harness, "/admin partners")
    assert "Mira (example) — A warm, curious companion" in cards
    assert "memory: per_user, public, bound chats: 1" in cards
    assert "last activity: 20" in cards and "never" not in cards
    used = sum(
        r["prompt_tokens"] + r["completion_tokens"] for r in await harness.app.store.usage("")
    )
    assert used > 0 and f"tokens today: {used}" in cards


async def test_partner_new_creates_from_the_template_and_refuses_bad_ids(harness: Harness) -> None:
    answer = await admin(harness, "/admin partner new kai Kai the Cat")
    assert answer.startswith("Created Kai the Cat (kai)")
    assert harness.app.catalog.require("kai").name == "Kai the Cat"
    assert "not a valid partner id" in await admin(harness, "/admin partner new Bad!")
    assert "exists already" in await admin(harness, "/admin partner new kai")
    assert "limit is 60" in await admin(harness, "/admin partner new long " + "n" * 61)
    assert harness.app.catalog.get("long") is None


async def test_a_new_partner_is_private_until_the_owner_publishes_it(harness: Harness) -> None:
    answer = await admin(harness, "/admin partner new kai Kai the Cat")
    assert "private until you publish it: /admin partner set kai public true" in answer
    assert "kai" not in [p.id for p in harness.app.catalog.public()]
    await admin(harness, "/admin partner set kai public true")
    assert "kai" in [p.id for p in harness.app.catalog.public()]


async def test_partner_clone_copies_persona_without_journals(harness: Harness) -> None:
    (partner_dir(harness) / "memory" / "2024-01-01.md").write_text("# 2024-01-01\n")
    assert "Cloned example to twin" in await admin(harness, "/admin partner clone example twin")
    twin = partner_dir(harness, "twin")
    assert (twin / "SOUL.md").read_bytes() == (partner_dir(harness) / "SOUL.md").read_bytes()
    assert not (twin / "memory" / "2024-01-01.md").exists()
    assert "no partner 'ghost'" in await admin(harness, "/admin partner clone ghost twin2")


async def test_delete_asks_first_then_moves_the_partner_to_the_trash(harness: Harness) -> None:
    directory = partner_dir(harness)
    [question] = await admin_messages(harness, "/admin partner delete example")
    assert "partners/.trash" in question.text
    [button] = question.choices
    assert button.command == "/admin partner delete example confirm"
    assert directory.exists() and harness.app.catalog.get("example") is not None
    answer = await admin(harness, button.command)
    assert answer.startswith("Moved Mira to")
    assert not directory.exists() and harness.app.catalog.get("example") is None
    trashed = list((directory.parent / ".trash").iterdir())
    assert len(trashed) == 1 and (trashed[0] / "SOUL.md").exists()
    assert "no partner 'example'" in await admin(harness, "/admin partner delete example")


async def test_partner_show_lists_settings_and_file_fingerprints(harness: Harness) -> None:
    shown = await admin(harness, "/admin partner show example")
    soul = (partner_dir(harness) / "SOUL.md").read_bytes()
    assert "memory scope: per_user, public: true" in shown
    assert f"SOUL.md: {len(soul.decode())}, {fingerprint(soul)}" in shown
    assert "no partner 'zed'" in await admin(harness, "/admin partner show zed")


async def _fetch(harness: Harness, name: str) -> tuple[bytes, str]:
    """``partner edit``: the file sent and the caption command that puts it back."""
    await admin(harness, f"/admin partner edit example {name}")
    _, filename, data, caption = harness.channel.files[-1]
    assert filename == f"example-{name}"
    put = re.search(r"/admin partner put example \S+ [0-9a-f]{12}", caption)
    assert put is not None
    return data, put.group(0)


async def test_edit_round_trip_saves_the_file_with_a_changelog_record(harness: Harness) -> None:
    data, put = await _fetch(harness, "SOUL.md")
    assert put.endswith(fingerprint(data))
    edited = data + b"\nYou love thunderstorms.\n"
    answer = await admin(harness, put, attachment=("SOUL.md", edited))
    assert answer.startswith("Saved SOUL.md of Mira") and "new conversations" in answer
    assert (partner_dir(harness) / "SOUL.md").read_bytes() == edited
    change = (await harness.app.memory.changes(partner_dir(harness)))[-1]
    assert (change.op, change.file) == ("replace_file", "SOUL.md")
    assert change.old == data.decode() and change.new == edited.decode()
    assert "unchanged" in await admin(
        harness, put.replace(fingerprint(data), fingerprint(edited)), attachment=("SOUL.md", edited)
    )


async def test_edit_is_refused_when_the_file_changed_meanwhile(harness: Harness) -> None:
    (partner_dir(harness) / "MEMORY.md").write_text("- Owner likes tea\n")
    data, put = await _fetch(harness, "MEMORY.md")
    memory_file = MemoryFile(partner_dir(harness), "MEMORY.md")
    await harness.app.memory.add(memory_file, "Owner moved to Porto", reason="review", source="t")
    current = (partner_dir(harness) / "MEMORY.md").read_bytes()
    answer = await admin(harness, put, attachment=("MEMORY.md", b"- my stale copy\n"))
    assert answer.startswith("Not saved: MEMORY.md changed since")
    assert "Your edited copy (the document you sent) is kept as it is" in answer
    assert (partner_dir(harness) / "MEMORY.md").read_bytes() == current
    _, filename, sent, caption = harness.channel.files[-1]
    assert filename == "example-MEMORY.current.md" and filename in caption
    assert sent == current and fingerprint(current) in caption and data != current


async def test_edit_keeps_crlf_line_endings(harness: Harness) -> None:
    soul = partner_dir(harness) / "SOUL.md"
    soul.write_bytes(b"# Soul\r\nWarm and curious.\r\n")
    data, put = await _fetch(harness, "SOUL.md")
    assert data == b"# Soul\r\nWarm and curious.\r\n"
    edited_with_lf = b"# Soul\nWarm, curious and brave.\n"
    assert "Saved" in await admin(harness, put, attachment=("SOUL.md", edited_with_lf))
    assert soul.read_bytes() == b"# Soul\r\nWarm, curious and brave.\r\n"


async def test_an_empty_file_is_offered_as_text_with_its_put_command(harness: Harness) -> None:
    (partner_dir(harness) / "USER.md").write_bytes(b"")
    answer = await admin(harness, "/admin partner edit example USER.md")
    assert "USER.md of Mira is empty" in answer
    assert f"/admin partner put example USER.md {fingerprint(b'')}" in answer
    assert harness.channel.files == []
    saved = await admin(
        harness,
        f"/admin partner put example USER.md {fingerprint(b'')}",
        attachment=("USER.md", b"The owner lives in Porto.\n"),
    )
    assert saved.startswith("Saved USER.md")


async def test_put_needs_a_document_a_known_file_and_utf8(harness: Harness) -> None:
    soul = (partner_dir(harness) / "SOUL.md").read_bytes()
    put = f"/admin partner put example SOUL.md {fingerprint(soul)}"
    assert "send the edited file as a document" in await admin(harness, put)
    assert "not a partner file" in await admin(harness, "/admin partner edit example CONFIG.md")
    bad = await admin(harness, put, attachment=("SOUL.md", b"\xff\xfe broken"))
    assert "not UTF-8" in bad
    assert (partner_dir(harness) / "SOUL.md").read_bytes() == soul


async def test_a_file_over_the_limit_is_refused_before_it_is_fetched(harness: Harness) -> None:
    soul = (partner_dir(harness) / "SOUL.md").read_bytes()
    put = f"/admin partner put example SOUL.md {fingerprint(soul)}"
    huge = Attachment("SOUL.md", "file-huge", MAX_EDIT_BYTES + 1)
    answer = await admin(harness, put, attachment=huge)
    assert "SOUL.md is over 524,288 bytes" in answer and "send a smaller file" in answer
    assert harness.channel.downloads == []
    assert (partner_dir(harness) / "SOUL.md").read_bytes() == soul


async def test_a_file_that_cannot_be_fetched_is_asked_for_again(harness: Harness) -> None:
    soul = (partner_dir(harness) / "SOUL.md").read_bytes()
    put = f"/admin partner put example SOUL.md {fingerprint(soul)}"
    gone = Attachment("SOUL.md", "file-gone", 10)
    answer = await admin(harness, put, attachment=gone)
    assert "SOUL.md could not be fetched" in answer and "send it again" in answer
    assert (partner_dir(harness) / "SOUL.md").read_bytes() == soul


async def test_partner_set_changes_one_line_and_keeps_comments(harness: Harness) -> None:
    preset = partner_dir(harness) / "preset.yml"
    before = preset.read_text()
    assert "name is now Mira Bell" in await admin(
        harness, "/admin partner set example name Mira Bell"
    )
    after = preset.read_text()
    assert "name: Mira Bell" in after
    comments = [line for line in before.splitlines() if line.startswith("#")]
    assert comments and all(line in after.splitlines() for line in comments)
    assert harness.app.catalog.require("example").name == "Mira Bell"
    assert "public is now false" in await admin(harness, "/admin partner set example public false")
    assert harness.app.catalog.require("example").preset.public is False
    await admin(harness, "/admin partner set example timezone Europe/Lisbon")
    assert harness.app.catalog.require("example").preset.timezone == "Europe/Lisbon"


async def test_partner_set_refuses_bad_values_and_leaves_the_file(harness: Harness) -> None:
    preset = partner_dir(harness) / "preset.yml"
    before = preset.read_bytes()
    assert "name: is 61 characters; the limit is 60" in await admin(
        harness, "/admin partner set example name " + "n" * 61
    )
    assert "the limit is 200" in await admin(
        harness, "/admin partner set example description " + "d" * 201
    )
    assert "unknown time zone" in await admin(
        harness, "/admin partner set example timezone Mars/Base"
    )
    assert "true or false" in await admin(harness, "/admin partner set example public maybe")
    assert "cannot be set" in await admin(harness, "/admin partner set example colour blue")
    assert preset.read_bytes() == before


async def test_reload_reads_new_files_but_running_sessions_keep_their_prompt(
    harness: Harness,
) -> None:
    await say(harness, 42, "hello", "hi")
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    (partner_dir(harness) / "SOUL.md").write_text("You are now a pirate.\n")
    (partner_dir(harness) / "preset.yml").write_text("name: Captain Mira\n")
    answer = await admin(harness, "/admin reload")
    assert "Reloaded partners: example" in answer and "running ones keep their prompt" in answer
    assert harness.app.catalog.require("example").name == "Captain Mira"
    await say(harness, 42, "still there?", "yes")
    assert "pirate" not in harness.llm.requests[-1]["messages"][0]["content"]
    assert (await harness.app.store.session(session.id)).system_prompt == session.system_prompt  # type: ignore[union-attr]


async def test_export_sends_the_partner_files_and_sessions_as_jsonl(harness: Harness) -> None:
    await say(harness, 42, "I like green tea", "noted, green tea")
    answer = await admin(harness, "/admin export example")
    assert answer.startswith("Export of Mira")
    chat, filename, data, _ = harness.channel.files[-1]
    assert chat.chat_id == str(OWNER_ID) and filename.endswith(".tar.gz")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        names = set(archive.getnames())
        assert {"example/preset.yml", "example/SOUL.md", "example/sessions.jsonl"} <= names
        jsonl = archive.extractfile("example/sessions.jsonl")
        assert jsonl is not None
        records = [json.loads(line) for line in jsonl.read().decode().splitlines()]
    texts = [(r["role"], r["text"]) for r in records]
    assert ("user", "I like green tea") in texts and ("assistant", "noted, green tea") in texts
    assert all(r["session"] for r in records)
    assert "no partner 'nobody'" in await admin(harness, "/admin export nobody")
