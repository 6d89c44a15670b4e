"""/admin as a whole: only the owner reaches it, every action is audited, bad input gets a usage
line, long answers come in pages; and the access subcommands (pairing, allow/block, bind)."""

from __future__ import annotations

from typing import Any

from bot.admin.table import ADMIN
from bot.commands.paging import PAGE_CHARS, split_pages
from bot.commands.table import UNKNOWN
from tests.admin_support import admin, admin_messages, partner_dir, snapshot
from tests.conftest import OWNER_ID, Harness, dm, group_message

NON_OWNER = 42
PLAUSIBLE_ARGS = {
    "partners": "",
    "partner new": "sneaky",
    "partner clone": "example copy",
    "partner delete": "example confirm",
    "partner show": "example",
    "partner edit": "example SOUL.md",
    "partner put": "example SOUL.md e3b0c44298fc",
    "partner set": "example name Evil",
    "partner import": "confirm 0123456789",
    "partner export": "example --card",
    "lore": "example",
    "bind": "example",
    "unbind": "",
    "scene": "pause",
    "approve": "ABCDEF",
    "deny": "ABCDEF",
    "pending": "",
    "allow": "test:99",
    "block": f"test:{OWNER_ID}",
    "memory": "",
    "remember": "the owner is away",
    "forget": "m_18c2f0a1b2c3d",
    "journal": "example",
    "review": "example",
    "changes": "example",
    "undo": "c_18c2f0a1b2c3d",
    "consult": "example what do you know?",
    "transcript": "example abcdef",
    "sessions": "example",
    "status": "",
    "usage": "",
    "tools": "example",
    "settings": "review_turns 9",
    "reload": "",
    "export": "example",
    "backup": "",
    "web": "",
    "voice forget": "example",
}
NEEDS_ARGUMENTS = [
    "partner new",
    "partner clone",
    "partner delete",
    "partner show",
    "partner edit",
    "partner put",
    "partner set",
    "partner export",
    "lore",
    "bind",
    "approve",
    "deny",
    "allow",
    "block",
    "remember",
    "forget",
    "journal",
    "review",
    "undo",
    "consult",
    "transcript",
    "sessions",
    "export",
]


async def test_every_subcommand_is_covered_by_these_tests() -> None:
    assert set(PLAUSIBLE_ARGS) == set(ADMIN)
    assert set(NEEDS_ARGUMENTS) <= set(ADMIN)


async def test_a_non_owner_gets_the_unknown_answer_for_every_subcommand(harness: Harness) -> None:
    await harness.app.store.create_pairing("ABCDEF", "test:77", 3600)
    await harness.app.memory.add(harness.app.owner_file, "owner fact", reason="t", source="t")
    data = harness.config.data_dir
    before = (snapshot(data / "partners"), snapshot(data / "owner"))
    for name, args in PLAUSIBLE_ARGS.items():
        sent = len(harness.channel.sent)
        text = f"/admin {name} {args}".strip()
        evil = harness.channel.hold("SOUL.md", b"evil")
        await harness.send(dm(NON_OWNER, text, attachment=evil))
        await harness.settle()
        assert [m.text for m in harness.channel.sent[sent:]] == [UNKNOWN], text
    await harness.send(dm(NON_OWNER, "/admin"))
    await harness.settle()
    assert harness.channel.texts()[-1] == UNKNOWN
    assert await harness.app.store.audit_rows() == []
    assert harness.channel.files == []
    assert harness.channel.downloads == []  # a file sent with /admin is the owner's to fetch
    assert harness.llm.requests == []
    assert (await harness.app.store.pairing("ABCDEF"))["status"] == "pending"  # type: ignore[index]
    assert (await harness.app.store.settings()) == {}
    assert (snapshot(data / "partners"), snapshot(data / "owner")) == before
    assert not (data / "backups").exists()


async def test_a_non_owners_admin_in_a_bound_group_meets_the_silence_of_an_unknown_command(
    harness: Harness,
) -> None:
    """In a group an unknown command is never answered, even addressed to the bot: a
    non-owner's /admin there gets the same silence, so it cannot be told from a typo."""
    await harness.app.store.bind("test", "g1", "example", "command")
    await harness.send(group_message("g1", NON_OWNER, "/admin status"))
    await harness.send(group_message("g1", NON_OWNER, "/admin partner delete example confirm"))
    await harness.send(group_message("g1", NON_OWNER, "/nosuchcommand"))
    await harness.settle()
    assert harness.channel.texts() == []
    assert harness.llm.requests == []
    assert partner_dir(harness).exists()
    assert await harness.app.store.audit_rows() == []


async def test_missing_arguments_answer_with_the_usage_line(harness: Harness) -> None:
    for name in NEEDS_ARGUMENTS:
        answer = await admin(harness, f"/admin {name}")
        assert answer.startswith(f"Usage: /admin {name}"), (name, answer)
    answer = await admin(harness, "/admin settings review_turns")
    assert answer.startswith("Usage: /admin settings <key> <value>")


async def test_owner_actions_are_audited_with_their_outcome(harness: Harness) -> None:
    await admin(harness, "/admin remember I prefer mornings")
    await admin(harness, "/admin partner show nobody")
    rows = await harness.app.store.audit_rows()
    refused, remembered = rows[0], rows[1]
    assert remembered["action"] == "admin remember"
    assert remembered["actor"] == f"test:{OWNER_ID}"
    assert remembered["detail"] == {"args": ["I", "prefer", "mornings"], "outcome": "ok"}
    assert refused["action"] == "admin partner show"
    assert refused["detail"]["outcome"].startswith("refused: no partner 'nobody'")


async def test_admin_lists_subcommands_and_partner_lists_its_actions(harness: Harness) -> None:
    listing = await admin(harness, "/admin")
    assert "/admin partner delete <id>" in listing and "/admin backup" in listing
    partner = await admin(harness, "/admin partner")
    assert "/admin partner edit <id> <FILE>" in partner and "/admin backup" not in partner
    assert (await admin(harness, "/admin fly")).startswith("No /admin fly.")


async def test_long_answers_come_in_pages_with_a_next_button(harness: Harness) -> None:
    owner_file = harness.app.owner_file
    facts = [f"fact number {i:03d} about the owner and their long day" for i in range(200)]
    for fact in facts:
        await harness.app.memory.add(owner_file, fact, reason="test", source="test")
    [first] = await admin_messages(harness, "/admin memory")
    assert len(first.text) < PAGE_CHARS + 200
    assert "fact number 000" in first.text and "fact number 199" not in first.text
    [button] = first.choices
    assert button.label == "next" and button.command == "/admin memory --page 2"
    seen = first.text
    page, command = 2, button.command
    while command:
        [message] = await admin_messages(harness, command)
        assert f"(page {page} of" in message.text
        seen += message.text
        command = message.choices[0].command if message.choices else ""
        page += 1
    assert all(fact in seen for fact in facts)
    assert "only" in await admin(harness, f"/admin memory --page {page + 5}")
    assert "page number" in await admin(harness, "/admin memory --page zero")


def test_pages_are_cut_between_lines_and_lose_nothing() -> None:
    lines = [f"line {i} " + "x" * (i % 70) for i in range(400)]
    pages = split_pages("\n".join(lines), 500)
    assert all(len(page) <= 500 for page in pages)
    assert "\n".join(pages).split("\n") == lines


async def test_approve_lets_the_user_in_and_tells_them(harness_factory: Any) -> None:
    harness = await harness_factory(access={"dm_policy": "pairing"})
    await harness.send(dm(NON_OWNER, "hello?"))
    await harness.settle()
    code = (await harness.app.store.live_pairings())[0]["code"]
    await admin(harness, f"/admin approve {code.lower()}")
    assert harness.channel.texts(str(OWNER_ID))[-1] == f"Approved test:{NON_OWNER}."
    assert "You're in!" in harness.channel.texts(str(NON_OWNER))[-1]
    assert (await harness.app.store.user(f"test:{NON_OWNER}"))["access"] == "allowed"  # type: ignore[index]


async def test_approve_refuses_a_bad_or_expired_code(harness: Harness) -> None:
    assert "no pairing code 'NOPE99'" in await admin(harness, "/admin approve NOPE99")
    await harness.app.store.create_pairing("OLD234", "test:77", -1)
    assert "has expired" in await admin(harness, "/admin approve OLD234")
    assert "no open pairing code" in await admin(harness, "/admin deny OLD234")


async def test_pending_lists_live_codes_and_deny_closes_one(harness: Harness) -> None:
    await harness.app.store.upsert_user("test:77", "test", "77", "Carol", None)
    await harness.app.store.create_pairing("CAR234", "test:77", 3600)
    assert "CAR234 — Carol (test:77)" in await admin(harness, "/admin pending")
    assert "Refused the request from test:77" in await admin(harness, "/admin deny CAR234")
    assert "No pairing requests" in await admin(harness, "/admin pending")


async def test_allow_and_block_need_a_known_user(harness: Harness) -> None:
    assert "never seen user test:555" in await admin(harness, "/admin allow 555")
    await harness.send(dm(NON_OWNER, "hi"))
    await harness.settle()
    assert "is now blocked" in await admin(harness, f"/admin block {NON_OWNER}")
    assert (await harness.app.store.user(f"test:{NON_OWNER}"))["access"] == "blocked"  # type: ignore[index]


async def test_bind_works_in_a_group_and_refuses_a_dm_or_unknown_partner(harness: Harness) -> None:
    assert "inside the group" in await admin(harness, "/admin bind example")
    await harness.send(group_message("g7", OWNER_ID, "/admin bind nobody", name="Owner"))
    await harness.send(group_message("g7", OWNER_ID, "/admin bind example", name="Owner"))
    await harness.settle()
    assert "no partner 'nobody'" in harness.channel.texts("g7")[0]
    assert harness.channel.texts("g7")[1] == "Mira now answers here."
    assert [b["partner_id"] for b in await harness.app.store.bindings("test", "g7")] == ["example"]
    await harness.send(group_message("g7", OWNER_ID, "/admin unbind", name="Owner"))
    await harness.settle()
    assert harness.channel.texts("g7")[-1] == "Unbound 1 partner(s) here."


async def test_expired_pairing_codes_are_not_listed(harness: Harness) -> None:
    await harness.app.store.create_pairing("GONE23", "test:78", -1)
    assert "No pairing requests" in await admin(harness, "/admin pending")


async def test_owner_commands_other_than_bind_answer_only_in_a_dm(harness: Harness) -> None:
    await harness.app.memory.add(harness.app.owner_file, "owner secret", reason="t", source="t")
    await harness.app.store.bind("test", "g1", "example", "command")
    await harness.send(group_message("g1", OWNER_ID, "/admin memory", name="Owner"))
    await harness.settle()
    [answer] = harness.channel.texts("g1")
    assert answer == "/admin memory works in your direct chat with me."
    assert (await harness.app.store.audit_rows())[0]["detail"]["outcome"].startswith("refused")
