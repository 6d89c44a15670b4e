"""Partners on PostgreSQL are the database's, not a worker's disk (docs/architecture.md "Several
workers
(PostgreSQL): the database is the only truth"): two workers in this process, each with its
own empty data directory, share one database and one recording channel (either may answer a
turn). A partner made, changed, imported or deleted on one is what the other serves, within
a heartbeat or at once when it is asked about it; a user whose partner one worker has not
heard of yet is never answered by another partner."""

from __future__ import annotations

import asyncio
import io
import re
import socket
import tarfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.app import build_app
from partners.memory import MemoryFile
from partners.memory_format import fingerprint
from tests import card_fixtures as cards
from tests.admin_support import admin, admin_messages
from tests.conftest import OWNER_ID, Harness, RecordingChannel, dm, make_config
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_web_auth import logged_in
from tests.test_web_pages import post

WAIT_SECONDS = 15.0
QUICK = {"lease_seconds": 2, "heartbeat_seconds": 0.5}
"""Workers that check the catalog every half second."""
DEAF = {"lease_seconds": 600, "heartbeat_seconds": 200}
"""A worker that hears of no change by itself within a test: only when it is asked."""
ALICE = 42
HOST = socket.gethostname()


async def until(condition: Callable[[], object], what: str) -> None:
    """Poll state that has no event of its own until it holds, or fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {WAIT_SECONDS:g}s waiting for {what}")
        await asyncio.sleep(0.02)


@dataclass
class Workers:
    """Gateways on one PostgreSQL database, each with a data directory of its own."""

    url: str
    tmp: Path
    llm: FakeLLM
    channel: RecordingChannel = field(default_factory=RecordingChannel)
    running: list[Harness] = field(default_factory=list)

    async def start(
        self, name: str, workers: dict[str, Any] | None = None, **sections: dict[str, Any]
    ) -> Harness:
        config = make_config(
            self.tmp / name,
            self.llm.base_url,
            storage={"database_url": self.url},
            workers={"id": name, **(workers or QUICK)},
            **sections,
        )
        app = await build_app(config, {"test": self.channel})
        app.gateway.access.is_owner.keys.add(f"test:{OWNER_ID}")
        await app.start()
        harness = Harness(app, self.channel, self.llm, config)
        self.running.append(harness)
        return harness

    async def stop(self, harness: Harness) -> None:
        await harness.app.stop()
        self.running.remove(harness)


@pytest.fixture
async def workers(
    postgres_database: str, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[Workers]:
    together = Workers(postgres_database, tmp_path, fake_llm)
    yield together
    for harness in list(together.running):
        await together.stop(harness)


async def turn(workers: Workers, harness: Harness, text: str, answer: str) -> str:
    """A message from Alice received by ``harness`` and answered by whichever worker takes
    the turn; the system prompt the model saw."""
    workers.llm.script(Reply(text=answer))
    asked = len(workers.llm.requests)
    await harness.send(dm(ALICE, text))
    await until(lambda: answer in workers.channel.texts(), f"the answer {answer!r}")
    assert len(workers.llm.requests) == asked + 1
    return str(workers.llm.requests[-1]["messages"][0]["content"])


async def new_luna(harness: Harness) -> str:
    """The owner makes partner luna and publishes it (a new partner is private): Alice may
    pick it. The answer to its creation."""
    created = await admin(harness, "/admin partner new luna Luna")
    assert "public is now true" in await admin(harness, "/admin partner set luna public true")
    return created


def public(harness: Harness, partner_id: str) -> bool:
    """Whether this worker knows the partner as one anybody may pick."""
    return partner_id in [p.id for p in harness.app.catalog.public()]


async def command(harness: Harness, text: str, user: int = ALICE) -> str:
    """A user's command on ``harness``; its answer."""
    before = len(harness.channel.sent)
    await harness.send(dm(user, text))
    await harness.channel.wait_sent(before + 1)
    return harness.channel.sent[before].text


async def test_a_partner_made_on_one_worker_is_served_by_another(workers: Workers) -> None:
    a = await workers.start("a")
    b = await workers.start("b")
    assert (await new_luna(a)).startswith("Created Luna (luna)")
    await until(lambda: public(b, "luna"), "worker b to know luna, published")
    await workers.stop(a)  # from now on b answers every turn
    assert "Luna (luna)" in await command(b, "/partner")
    assert (await command(b, "/partner luna")).startswith("You're now talking with Luna")
    assert "You are Luna" in await turn(workers, b, "hello", "hi, I'm Luna")
    assert "You are Luna" in await turn(workers, b, "how are you?", "fine, still Luna")
    assert not (workers.tmp / "b" / "partners").exists()


async def test_a_worker_that_has_not_heard_of_a_partner_never_answers_as_another(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    b = await workers.start("b", DEAF)
    await new_luna(a)
    assert (await command(a, "/partner luna")).startswith("You're now talking with Luna")
    assert b.app.catalog.get("luna") is None  # b has heard nothing yet
    assert "You are Luna" in await turn(workers, b, "hello", "hi there")
    assert "You are Luna" in await turn(workers, b, "still you?", "yes, Luna")
    assert b.app.catalog.get("luna") is not None


async def test_a_changed_setting_reaches_the_prompt_on_another_worker(workers: Workers) -> None:
    a = await workers.start("a")
    b = await workers.start("b")
    await new_luna(a)
    await until(lambda: public(b, "luna"), "worker b to know luna, published")
    assert "name is now Stella" in await admin(a, "/admin partner set luna name Stella")
    await until(lambda: b.app.catalog.require("luna").name == "Stella", "b to see the new name")
    await workers.stop(a)
    await command(b, "/partner luna")
    assert "You are Stella" in await turn(workers, b, "hello", "hi")


async def test_a_card_imported_on_one_worker_brings_persona_greeting_and_lore_to_another(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    b = await workers.start("b")
    card = cards.png(cards.v3())
    [question] = await admin_messages(a, "/admin partner import sirin", ("sirin.png", card))
    [button] = question.choices
    assert "Created" in await admin(a, button.command)
    await admin(a, "/admin partner set sirin public true")  # an import is private
    await until(lambda: public(b, "sirin"), "worker b to know sirin, published")
    await workers.stop(a)
    sent = len(workers.channel.sent)
    await b.send(dm(ALICE, "/partner sirin"))
    greeting = (await workers.channel.wait_sent(sent + 2))[sent + 1]
    assert greeting.text == "*looks up from the easel* Oh, hello Alice! I'm Ŝirin 🌙."
    avatar = b.app.catalog.require("sirin").avatar_image
    assert avatar is not None and avatar.startswith(b"\x89PNG")
    prompt = await turn(workers, b, "tell me about the lighthouse", "the keeper...")
    assert "a lighthouse painter who talks to Alice kindly" in prompt
    lore = str(workers.llm.requests[-1]["messages"])
    assert "The lighthouse keeper 0 is called Oren; Ŝirin 🌙 fears him." in lore
    assert "Stay in character as Ŝirin 🌙." in lore  # its post-history instructions


async def test_a_partner_deleted_on_one_worker_is_gone_on_another_and_the_user_is_told(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    b = await workers.start("b")
    await new_luna(a)
    await until(lambda: public(b, "luna"), "worker b to know luna, published")
    await command(b, "/partner luna")
    assert "Moved Luna to" in await admin(a, "/admin partner delete luna confirm")
    await until(lambda: b.app.catalog.get("luna") is None, "worker b to let luna go")
    assert "luna" not in await command(b, "/partner")
    asked = len(workers.llm.requests)
    told = await command(b, "are you there?")
    assert "(luna) is no longer here" in told
    assert len(workers.llm.requests) == asked  # nobody else answered it
    assert "You are Mira" in await turn(workers, b, "hello?", "Mira here")  # told once


async def test_a_worker_with_an_empty_data_directory_serves_the_databases_partners(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    await new_luna(a)
    await workers.stop(a)
    b = await workers.start("b")
    assert [p.id for p in b.app.catalog.all()] == ["example", "luna"]
    await command(b, "/partner luna")
    assert "You are Luna" in await turn(workers, b, "hello", "hi")
    assert not (workers.tmp / "b" / "partners").exists()


async def test_status_shows_the_catalog_version_each_worker_has_loaded(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    b = await workers.start("b", DEAF)
    await admin(a, "/admin partner new luna Luna")
    version = a.app.catalog.version
    status = await admin(a, "/admin status")
    assert f"a on {HOST}" in status and f"partners: 2 (catalog version {version})" in status
    assert f"partners: 1 (catalog version {version - 1})" in status  # b is behind: it shows
    await command(b, "/partner luna")  # b is asked about luna: it loads the catalog again
    status = await admin(a, "/admin status")
    assert f"partners: 1 (catalog version {version - 1})" not in status


async def test_the_web_pages_partner_editor_writes_what_another_worker_serves(
    workers: Workers,
) -> None:
    a = await workers.start("a", web={"enabled": True, "port": 0})
    b = await workers.start("b")
    browser, base, csrf = await logged_in(a)
    async with browser:
        made = await post(browser, base + "/partners", {"csrf": csrf, "id": "luna", "name": "Luna"})
        assert "Created Luna (luna)" in made
        await admin(a, "/admin partner set luna public true")  # a new partner is private
        page = await post(
            browser,
            base + "/partners/luna/settings",
            {"csrf": csrf, "was:name": "Luna", "name": "Stella"},
        )
        assert "name is now Stella" in page
        editor = base + "/partners/luna/files/SOUL.md"
        async with browser.get(editor) as response:
            [version] = re.findall(r'name="version" value="([0-9a-f]+)"', await response.text())
        text = "You are {{partner}}, keeper of the web page.\n"
        saved = await post(
            browser, editor, {"csrf": csrf, "version": version, "text": text, "step": "save"}
        )
        assert "Saved SOUL.md of Stella" in saved
    await until(lambda: b.app.catalog.get("luna") is not None, "worker b to know luna")
    await until(lambda: b.app.catalog.require("luna").name == "Stella", "b to see the name")
    await workers.stop(a)
    await command(b, "/partner luna")
    assert "You are Stella, keeper of the web page." in await turn(workers, b, "hi", "hello")


async def test_an_export_on_another_worker_holds_what_the_database_keeps(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    await new_luna(a)
    await workers.stop(a)
    b = await workers.start("b")
    await command(b, "/partner luna")
    await turn(workers, b, "hello", "hi")
    await admin(b, "/admin export luna")
    _, filename, data, _ = workers.channel.files[-1]
    assert filename.startswith("luna-") and filename.endswith(".tar.gz")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        names = set(archive.getnames())
        preset = archive.extractfile("luna/preset.yml")
        assert preset is not None and b"name: Luna" in preset.read()
    assert {"luna/SOUL.md", "luna/MEMORY.md", "luna/sessions.jsonl"} <= names


async def test_post_history_instructions_edited_on_one_worker_reach_turns_on_another(
    workers: Workers,
) -> None:
    a = await workers.start("a")
    b = await workers.start("b")
    partner = a.app.catalog.require("example")
    file = MemoryFile(partner.dir, "POST_HISTORY.md")
    await a.app.memory.replace_file(
        file, "Answer in haiku.\n", fingerprint(b""), reason="test", source="test"
    )
    await until(
        lambda: b.app.catalog.require("example").file("POST_HISTORY.md") is not None,
        "worker b to load the instructions",
    )
    await workers.stop(a)
    await turn(workers, b, "hello", "five seven five")
    assert "Answer in haiku." in str(workers.llm.requests[-1]["messages"])
