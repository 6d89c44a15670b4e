"""Every command answers (docs/architecture.md "Decisions": nothing stays pending forever): whatever
breaks inside a command, the sender gets a short apology, the owner is told and an audit row
says what failed. The failure here is real: a per-user memory file that is a directory."""

from __future__ import annotations

from bot.commands.handlers import HANDLERS
from bot.commands.table import COMMANDS
from partners.tools import user_memory_file
from tests.conftest import OWNER_ID, Harness, dm

ALICE = 42


def break_alices_file(harness: Harness) -> None:
    """A per-user file that cannot be read at all (a directory where the file should be)."""
    partner = harness.app.catalog.require("example")
    user_memory_file(partner, f"test:{ALICE}").path.mkdir(parents=True)


async def test_a_user_command_that_breaks_still_answers_and_the_owner_is_told(
    harness: Harness,
) -> None:
    break_alices_file(harness)
    await harness.send(dm(ALICE, "/memory"))
    await harness.settle()
    [answer] = harness.channel.texts(str(ALICE))
    assert answer.startswith("Sorry, /memory didn't work because of a problem on my side")
    assert "The owner has been told" in answer
    [notice] = harness.channel.texts(str(OWNER_ID))
    assert "/memory from test:42 failed (IsADirectoryError" in notice
    [row] = await harness.app.store.audit_rows("command_failed")
    assert row["actor"] == f"test:{ALICE}" and row["detail"]["command"] == "memory"


async def test_an_owner_command_that_breaks_answers_the_owner_once(harness: Harness) -> None:
    break_alices_file(harness)
    await harness.send(dm(OWNER_ID, f"/admin memory example test:{ALICE}", name="Owner"))
    await harness.settle()
    [answer] = harness.channel.texts(str(OWNER_ID))
    assert answer.startswith("Sorry, /admin didn't work because of a problem on my side")
    assert "IsADirectoryError" in answer and "The log has the details" in answer


async def test_the_next_command_of_the_same_user_is_served(harness: Harness) -> None:
    break_alices_file(harness)
    await harness.send(dm(ALICE, "/memory"))
    await harness.send(dm(ALICE, "/help"))
    await harness.settle()
    assert harness.channel.texts(str(ALICE))[-1].startswith("/start")


async def test_help_and_start_tell_a_user_the_owner_can_read_and_spare_the_owner(
    harness: Harness,
) -> None:
    for command in ("/help", "/start"):
        await harness.send(dm(ALICE, command))
        await harness.send(dm(OWNER_ID, command, name="Owner"))
    await harness.settle()
    note = "The owner can read conversations"
    assert all(note in answer for answer in harness.channel.texts(str(ALICE)))
    owners = harness.channel.texts(str(OWNER_ID))
    assert len(owners) == 2 and not any(note in answer for answer in owners)
    assert "/admin — owner commands" in owners[0]


def test_every_declared_command_has_its_handler_and_no_handler_goes_undeclared() -> None:
    # the table (what the channels show) and the handlers (what answers) are apart: a command
    # offered as a slash command that nothing answers would be the unknown-command answer
    assert HANDLERS.keys() == COMMANDS.keys()
