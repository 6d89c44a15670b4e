"""Answers that agree with each other: what ``/memory`` shows is
what was saved, ``/checkins on`` promises nothing the partner cannot do, every change
``/admin undo`` takes can be listed, and a new partner is not another "Mira"."""

from __future__ import annotations

import re

from bot.text.literal import unescape
from tests.admin_support import admin, partner_dir
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply, ToolCallSpec

PROACTIVE = "name: Mira\nproactive:\n  enabled: true\n"


async def memorize(harness: Harness, user: int, fact: str, name: str) -> str:
    """The partner saves ``fact`` while talking with ``user``; returns its reply."""
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_memorize", {"op": "add", "text": fact})]),
        Reply(text="Saved!"),
    )
    return await command(harness, user, f"please remember: {fact}", name)


async def command(harness: Harness, user: int, text: str, name: str = "Alice") -> str:
    before = len(harness.channel.sent)
    await harness.send(dm(user, text, name=name))
    await harness.settle()
    return "\n".join(m.text for m in harness.channel.sent[before:])


# ---- /memory --------------------------------------------------------------------------------


async def test_the_owner_sees_in_memory_what_was_just_saved_about_them(harness: Harness) -> None:
    await command(harness, OWNER_ID, "/partner example", "Owner")
    assert await memorize(harness, OWNER_ID, "The owner grows tomatoes", "Owner") == "Saved!"
    answer = unescape(await command(harness, OWNER_ID, "/memory", "Owner"))
    assert "The owner grows tomatoes" in answer
    assert "doesn't remember anything" not in answer
    assert "MEMORY.md" in answer  # and says where it is kept


async def test_the_owner_sees_the_shared_memory_instead_of_being_told_to_ask_the_owner(
    harness: Harness,
) -> None:
    (partner_dir(harness) / "preset.yml").write_text("name: Mira\nmemory_scope: shared\n")
    harness.app.catalog.reload()
    await command(harness, OWNER_ID, "/partner example", "Owner")
    await memorize(harness, OWNER_ID, "The owner likes green tea", "Owner")
    answer = unescape(await command(harness, OWNER_ID, "/memory", "Owner"))
    assert "The owner likes green tea" in answer and "Ask the owner" not in answer
    alice = await command(harness, 42, "/memory")
    assert "green tea" not in alice and "owner manages it" in alice


# ---- /checkins ------------------------------------------------------------------------------


async def test_checkins_on_does_not_promise_what_the_partner_cannot_send(
    harness: Harness,
) -> None:
    answer = await command(harness, 42, "/checkins on")
    assert "may now write to you" not in answer
    assert "Mira does not write first" in answer and "proactive" in answer
    assert "does not write first" in await command(harness, 42, "/checkins")


async def test_checkins_on_promises_check_ins_when_the_partner_sends_them(
    harness: Harness,
) -> None:
    (partner_dir(harness) / "preset.yml").write_text(PROACTIVE)
    harness.app.catalog.reload()
    assert "Mira may now write to you" in await command(harness, 42, "/checkins on")
    assert "Check-ins from Mira are on" in await command(harness, 42, "/checkins")


# ---- /admin changes -------------------------------------------------------------------------


async def test_admin_changes_lists_the_ids_admin_undo_takes(harness: Harness) -> None:
    await memorize(harness, 42, "Alice likes **bold** [links](https://x.y)", "Alice")
    await admin(harness, "/admin remember The owner is left-handed")
    listing = await admin(harness, "/admin changes example")
    ids = re.findall(r"c_[0-9a-z]+", listing)
    assert len(ids) == 1, listing
    shown = unescape(listing)
    assert "users/test-42.md" in shown and "add" in shown
    assert "Alice likes **bold** [links](https://x.y)" in shown  # literal, not formatted
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", shown)
    assert "left-handed" not in shown  # the owner's memory is not the partner's
    assert "left-handed" in unescape(await admin(harness, "/admin changes"))
    answer = await admin(harness, f"/admin undo {ids[0]}")
    assert answer.startswith(f"Undid {ids[0]}")
    assert "bold" not in (partner_dir(harness) / "users" / "test-42.md").read_text()


# ---- /admin partner new ---------------------------------------------------------------------


async def test_a_new_partner_needs_a_name_and_no_mira_is_left_in_its_files(
    harness: Harness,
) -> None:
    refused = await admin(harness, "/admin partner new luna")
    assert "name" in refused and harness.app.catalog.get("luna") is None
    assert "Created Luna (luna)" in await admin(harness, "/admin partner new luna Luna")
    directory = partner_dir(harness, "luna")
    texts = {p.name: p.read_text(encoding="utf-8") for p in directory.glob("*.*")}
    assert [name for name, text in texts.items() if "Mira" in text] == []
    assert harness.app.catalog.require("luna").name == "Luna"
