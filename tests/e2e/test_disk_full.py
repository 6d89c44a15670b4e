"""A full disk: writes fail part-way, nothing already stored is damaged, the owner is told, and
the gateway answers again once there is room.

The disk is "full" for the child only: it runs with RLIMIT_FSIZE (set in the child before it
starts, lowered and lifted later with prlimit), so a write that would make a file larger than
the limit fails with EFBIG. CI runs as root, so a read-only directory would not stop it; Python
ignores SIGXFSZ, so the write fails instead of killing the process.
"""

from __future__ import annotations

import hashlib
import re
import resource
from datetime import UTC, datetime, timedelta

from tests.e2e.conftest import OWNER, World, assert_no_secrets
from tests.e2e.gateway_process import GatewayProcess

USER = 801
FILE_LIMIT_BYTES = 256 * 1024
NO_ROOM_BYTES = 4096
"""Lowered to this, no file may grow past 4 KiB: the database cannot append anything."""
HAND_WRITTEN_LINE = "- a line the owner wrote by hand, long enough to fill the file quickly\n"
WAITING_CHATS = 4
TIMEOUT_SECONDS = 60.0
NOT_STORED = re.compile(r"update (\d+) not stored")


def digests(world: World) -> dict[str, str]:
    """Every memory document and its digest (changelogs grow; documents must not change)."""
    root = world.data_dir
    paths = [*root.glob("owner/*.md"), *root.glob("partners/*/*.md"),
             *root.glob("partners/*/users/*.md"), *root.glob("partners/*/memory/*.md")]  # fmt: skip
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


async def all_recorded(world: World, gateway: GatewayProcess) -> None:
    """Every reply sent is also recorded (its delivery rows are written after the send)."""
    await gateway.wait_until(
        lambda: world.query(
            "SELECT COUNT(*) FROM messages WHERE status IN ('pending', 'delivering')"
        )[0][0] == 0,
        TIMEOUT_SECONDS, "every reply to be recorded as delivered",
    )  # fmt: skip


def set_file_limit(pid: int, limit: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


async def test_a_full_disk_damages_nothing_and_service_resumes_with_room(world: World) -> None:
    gateway = await world.start()
    facts = []
    for _ in range(3):
        tag = world.tag()
        facts.append(f"fact {tag}")
        world.send(USER, f"remember this about me #{tag} memorize")
        await world.wait_for_reply(tag)
    assert await gateway.terminate() == 0
    # the user's file is close to the limit: the next write of it cannot fit
    user_file = world.data_dir / "partners" / "example" / "users" / f"telegram-{USER}.md"
    with user_file.open("a", encoding="utf-8") as handle:
        handle.write(HAND_WRITTEN_LINE * (FILE_LIMIT_BYTES // len(HAND_WRITTEN_LINE) - 1))
    before = digests(world)
    messages_before = world.query("SELECT id, role, status, text FROM messages ORDER BY id")

    full = await world.start(file_size_limit=FILE_LIMIT_BYTES)

    # a memory write that does not fit: the partner still answers, the file is untouched
    tag = world.tag()
    world.send(USER, f"remember my new address #{tag} memorize")
    await world.wait_for_reply(tag)
    await full.wait_for_line(f"memory write to {user_file} failed: [Errno 27] File too large")
    assert f"fact {tag}" not in world.memory_text()
    assert digests(world) == before
    await all_recorded(world, full)

    # no room at all: messages stay with Telegram, the owner hears why, nothing is answered
    set_file_limit(full.pid, NO_ROOM_BYTES)
    waiting = [world.tag() for _ in range(WAITING_CHATS)]
    for number, tag in enumerate(waiting):
        world.send(USER + 1 + number, f"anything new? #{tag}")
    [notice] = await world.telegram.wait_for_sent(chat_id=OWNER, timeout=TIMEOUT_SECONDS)
    assert "cannot store incoming Telegram messages" in (notice.text or "")
    assert "disk I/O error" in (notice.text or "")
    await full.wait_until(
        lambda: len(set(NOT_STORED.findall(full.output))) >= WAITING_CHATS,
        TIMEOUT_SECONDS, "every waiting message to be refused",
    )  # fmt: skip
    assert all(world.replies_naming(tag) == [] for tag in waiting)

    # room again: the waiting messages are answered, once each, without a restart
    set_file_limit(full.pid, resource.RLIM_INFINITY)
    for tag in waiting:
        await world.wait_for_reply(tag, timeout=TIMEOUT_SECONDS)
    await full.wait_for_line("telegram: storing updates again")
    assert all(len(world.replies_naming(tag)) == 1 for tag in waiting)
    assert len(world.replies(OWNER)) == 1, "the owner is told once per stretch of trouble"
    await all_recorded(world, full)
    assert await full.terminate() == 0

    gateway = await world.start()
    assert world.integrity() == "ok"
    last_before = messages_before[-1][0]
    kept = world.query(
        "SELECT id, role, status, text FROM messages WHERE id <= ? ORDER BY id", (last_before,)
    )
    assert kept == messages_before
    assert digests(world) == before
    assert world.memory_problems() == []
    assert not list(world.data_dir.rglob(".*.tmp")), "a failed write left its temporary file"
    memory = world.memory_text()
    assert all(memory.count(fact) == 1 for fact in facts)
    tag = world.tag()
    world.send(USER, f"are you back? #{tag}")
    await world.wait_for_reply(tag)
    assert all(len(world.replies_naming(tag)) == 1 for tag in waiting)
    assert_no_secrets(full.output + gateway.output)


REVIEW_FILE_LIMIT_BYTES = 2 * 1024 * 1024
"""Room for the database and its WAL through a few turns; a journal grown close to it is full."""
JOURNAL_ROOM_BYTES = 64
ALICE, BOB = 811, 812


def fill_journals(world: World, partner: str) -> dict[str, str]:
    """Today's and tomorrow's journal (UTC, the owner's zone) of ``partner`` close to the file
    size limit, so a review's journal entry cannot fit whenever it runs; returns their digests."""
    directory = world.data_dir / "partners" / partner / "memory"
    directory.mkdir(parents=True, exist_ok=True)
    today = datetime.now(UTC).date()
    filled = {}
    for day in (today, today + timedelta(days=1)):
        path = directory / f"{day.isoformat()}.md"
        header = f"# {day.isoformat()}\n"
        size = REVIEW_FILE_LIMIT_BYTES - JOURNAL_ROOM_BYTES - len(header)
        lines = HAND_WRITTEN_LINE * (size // len(HAND_WRITTEN_LINE))
        path.write_text(header + lines + "-" * (size - len(lines) - 1) + "\n", encoding="utf-8")
        filled[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return filled


def review_state(world: World) -> dict[str, tuple[int, int, str]]:
    """partner -> (reviewed up to, attempts, last error) of its one chat session."""
    rows = world.query(
        "SELECT partner_id, reviewed_upto, review_attempts, COALESCE(review_error, '')"
        " FROM sessions WHERE kind = 'chat'"
    )
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


async def test_a_review_that_cannot_write_fails_alone_and_the_next_is_done(world: World) -> None:
    world.add_partner("other", "Otto")
    filled = fill_journals(world, "example")
    config = world.config(
        memory={"auto_memory": True, "review_turns": 1}, partners={"default": "example"}
    )
    gateway = await world.start(config, file_size_limit=REVIEW_FILE_LIMIT_BYTES)
    world.send(BOB, "/partner other")
    await world.telegram.wait_for_sent(chat_id=BOB, timeout=TIMEOUT_SECONDS)
    alice, bob = world.tag(), world.tag()
    world.send(ALICE, f"my grandmother taught me to bake rye bread #{alice}")
    await world.wait_for_reply(alice)
    world.send(BOB, f"I am learning the cello at night school #{bob}")
    await world.wait_for_reply(bob)

    # Alice's review comes due first and cannot write its journal entry; Bob's is still done
    state = await gateway.wait_until(
        lambda: (s := review_state(world)).get("other", (0, 0, ""))[0] > 0
        and s.get("example", (0, 0, ""))[1] >= 1
        and s,
        TIMEOUT_SECONDS, "Bob's review done and Alice's failure counted",
    )  # fmt: skip
    upto, attempts, error = state["example"]
    assert upto == 0 and attempts == 1 and "File too large" in error
    journal = world.data_dir / "partners" / "example" / "memory"
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in journal.glob("*.md")} == (
        filled
    )
    other_journal = "".join(
        p.read_text("utf-8") for p in (world.data_dir / "partners" / "other" / "memory").glob("*")
    )
    assert f"talked about {bob}" in other_journal
    assert world.memory_problems() == []
    assert not list(world.data_dir.rglob(".*.tmp")), "a failed write left its temporary file"
    assert await gateway.terminate() == 0
