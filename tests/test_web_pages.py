"""The web page's pages over plain HTTP: each reads what ``/admin`` reads and changes things
only through the functions the ``/admin`` commands use, audited as ``web:owner``."""

from __future__ import annotations

import gzip
import re
import time
from pathlib import Path

import aiohttp

from bot.gateway.access import APPROVED_WELCOME
from partners.memory_format import fingerprint
from partners.tools import user_memory_file
from tests.admin_support import admin, partner_dir, say
from tests.conftest import OWNER_ID, Harness, HarnessFactory, dm
from tests.test_memory import edit_by_hand_in_the_same_tick
from tests.test_web_auth import logged_in, seen_user
from tests.web_support import csrf_of, web_harness

STRANGER = 555


async def page(browser: aiohttp.ClientSession, url: str) -> str:
    async with browser.get(url) as response:
        assert response.status == 200, (url, await response.text())
        return await response.text()


async def post(browser: aiohttp.ClientSession, url: str, data: dict[str, str]) -> str:
    async with browser.post(url, data=data) as response:
        assert response.status == 200, (url, await response.text())
        return await response.text()


def soul(harness: Harness) -> Path:
    return partner_dir(harness) / "SOUL.md"


async def test_a_persona_file_is_saved_after_its_diff(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    url = base + "/partners/example/files/SOUL.md"
    async with browser:
        editor = await page(browser, url)
        version = fingerprint(soul(harness).read_bytes())
        assert f'value="{version}"' in editor
        data = {"csrf": csrf, "version": version, "text": "You keep a lighthouse.\n"}
        preview = await post(browser, url, {**data, "step": "preview"})
        assert "+You keep a lighthouse." in preview
        assert soul(harness).read_bytes() != b"You keep a lighthouse.\n"
        saved = await post(browser, url, {**data, "step": "save"})
    assert "Saved SOUL.md" in saved
    assert soul(harness).read_text(encoding="utf-8") == "You keep a lighthouse.\n"
    [row] = await harness.app.store.audit_rows("web partner put")
    assert row["actor"] == "web:owner" and row["detail"]["outcome"] == "ok"
    assert "c_" in (await admin(harness, "/admin changes example"))


async def test_post_history_instructions_are_listed_and_edited_like_the_persona_files(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    url = base + "/partners/example/files/POST_HISTORY.md"
    async with browser:
        listing = await page(browser, base + "/partners/example")
        editor = await page(browser, url)
        [version] = re.findall(r'name="version" value="([0-9a-f]*)"', editor)
        data = {"csrf": csrf, "version": version, "text": "Stay in character.\n"}
        saved = await post(browser, url, {**data, "step": "save"})
    assert 'href="/partners/example/files/POST_HISTORY.md"' in listing
    assert "Saved POST_HISTORY.md" in saved
    post_history = (partner_dir(harness) / "POST_HISTORY.md").read_text(encoding="utf-8")
    assert post_history == "Stay in character.\n"


async def test_a_persona_edit_that_crossed_another_change_is_not_saved(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    url = base + "/partners/example/files/SOUL.md"
    async with browser:
        opened = fingerprint(soul(harness).read_bytes())
        soul(harness).write_text("A review wrote this meanwhile.\n", encoding="utf-8")
        data = {"csrf": csrf, "version": opened, "text": "My edit.\n", "step": "save"}
        answer = await post(browser, url, data)
    assert "Not saved" in answer
    assert "My edit." in answer and "A review wrote this meanwhile." in answer
    now = fingerprint(b"A review wrote this meanwhile.\n")
    assert f'value="{now}"' in answer  # saving again now applies to the current version
    assert soul(harness).read_text(encoding="utf-8") == "A review wrote this meanwhile.\n"


async def test_the_settings_form_sets_only_what_changed(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    async with browser:
        form = await page(browser, base + "/partners/example")
        fields = dict(re.findall(r'<input[^>]* name="([a-z_.:]+)" value="([^"]*)"', form))
        assert fields["memory_scope"] == fields["was:memory_scope"] == "per_user"
        changed = {**fields, "description": "A night-shift friend", "csrf": csrf}
        answer = await post(browser, base + "/partners/example/settings", changed)
        assert "description is now A night-shift friend" in answer
        bad = {**fields, "memory_scope": "everyone", "csrf": csrf}
        refused = await post(browser, base + "/partners/example/settings", bad)
    assert "memory_scope" in refused and "per_user" in refused
    assert harness.app.catalog.require("example").preset.description == "A night-shift friend"
    assert harness.app.catalog.require("example").preset.memory_scope == "per_user"
    rows = await harness.app.store.audit_rows("admin partner set")
    # the stale form (opened before the description changed) set only what it changed
    assert [r["detail"]["args"][1] for r in rows] == ["memory_scope", "description"]


async def test_memory_entries_are_remembered_edited_undone_and_forgotten(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    owner_file = harness.config.data_dir / "owner" / "MEMORY.md"
    async with browser:
        added = await post(
            browser, base + "/memory/remember", {"csrf": csrf, "text": "Tea, no milk"}
        )
        [entry] = set(re.findall(r"entry (m_[0-9a-z]+)", added))
        assert "Tea, no milk" in await page(browser, base + "/memory")
        edit = {"csrf": csrf, "entry": entry, "file": "MEMORY.md", "partner": "", "back": "/memory"}
        edited = await post(browser, base + "/memory/edit", {**edit, "text": "Tea with lemon"})
        [change] = re.findall(r"change (c_[0-9a-z]+)", edited)
        assert "Tea with lemon" in owner_file.read_text(encoding="utf-8")
        undone = await post(browser, base + "/memory/undo", {"csrf": csrf, "change": change})
        assert f"Undid {change}" in undone
        assert "Tea, no milk" in owner_file.read_text(encoding="utf-8")
        forget = {"csrf": csrf, "entry": entry, "partner": "", "back": "/memory"}
        gone = await post(browser, base + "/memory/forget", forget)
        after = await page(browser, base + "/memory")
    assert "Forgotten" in gone
    assert "Tea" not in owner_file.read_text(encoding="utf-8")
    # forgotten text is gone from the page too: entries and the changes list
    assert "Tea" not in after.split("</nav>", 2)[-1]
    actions = [row["action"] for row in await harness.app.store.audit_rows()]
    assert {"admin remember", "web memory edit", "admin undo", "admin forget"} <= set(actions)


async def test_undo_is_offered_only_on_changes_that_can_be_undone(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, csrf = await logged_in(harness)
    async with browser:
        kept = await post(browser, base + "/memory/remember", {"csrf": csrf, "text": "Tea"})
        gone = await post(browser, base + "/memory/remember", {"csrf": csrf, "text": "Coffee"})
        [tea] = set(re.findall(r"entry (m_[0-9a-z]+)", kept))
        [entry] = set(re.findall(r"entry (m_[0-9a-z]+)", gone)) - {tea}
        forget = {"csrf": csrf, "entry": entry, "partner": "", "back": "/memory"}
        await post(browser, base + "/memory/forget", forget)
        html = await page(browser, base + "/memory")
    changes = html.split("Latest changes to", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", changes, re.DOTALL)
    forgotten = [row for row in rows if "forgotten" in row]
    added = [row for row in rows if ">add<" in row]
    assert forgotten and all("Undo</button>" not in row for row in forgotten)
    assert all("cannot be undone" in row for row in forgotten)
    assert added and all("Undo</button>" in row for row in added)


async def test_a_partners_memory_is_searched_like_partner_search(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    await say(harness, 21, "my cat is called Biscuit", "What a lovely name!")
    browser, base, _ = await logged_in(harness)
    async with browser:
        found = await page(browser, base + "/memory/example?q=biscuit")
        nothing = await page(browser, base + "/memory/example?q=zeppelin")
    assert "my cat is called <b>Biscuit" in found or "my cat is called Biscuit" in found
    assert "no past messages match" in nothing


async def test_a_pairing_request_is_approved_from_the_page(harness_factory: HarnessFactory) -> None:
    harness = await harness_factory(
        web={"enabled": True, "port": 0}, access={"dm_policy": "pairing"}
    )
    await harness.send(dm(STRANGER, "hello?", name="Dana"))
    await harness.settle()
    [request] = await harness.app.store.live_pairings()
    browser, base, csrf = await logged_in(harness)
    async with browser:
        people = await page(browser, base + "/people")
        assert request["code"] in people and "Dana" in people
        approved = await post(
            browser, base + "/people/approve", {"csrf": csrf, "code": request["code"]}
        )
    assert f"Approved test:{STRANGER}" in approved
    assert harness.channel.texts(str(STRANGER))[-1] == APPROVED_WELCOME
    assert (await harness.app.store.pairing(request["code"]) or {})["status"] == "approved"


async def test_the_owner_is_listed_as_the_owner_without_allow_or_block(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    await say(harness, OWNER_ID, "hello", "hi")
    await say(harness, 42, "hello", "hi")
    browser, base, _ = await logged_in(harness)
    async with browser:
        people = await page(browser, base + "/people")
    rows = re.findall(r"<tr>(.*?)</tr>", people.split("<h2>Users</h2>", 1)[1], re.DOTALL)
    [owner] = [row for row in rows if f"test:{OWNER_ID}<" in row]
    [other] = [row for row in rows if "test:42<" in row]
    assert "<td>owner</td>" in owner and "unknown" not in owner
    assert "Block</button>" not in owner and "Allow</button>" not in owner
    assert "Block</button>" in other


async def test_usage_is_charted_per_partner_and_kind(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    day = harness.config.usage_day(time.time())
    await harness.app.store.add_usage(day, "example", "chat", "m", 1000, 234)
    await harness.app.store.add_usage(day, "example", "review", "m", 500, 0)
    await harness.app.store.add_units(day, "example", "transcription", "whisper", 75)
    browser, base, _ = await logged_in(harness)
    async with browser:
        usage = await page(browser, base + "/usage?days=7")
    assert "<td>transcription</td><td>75 s heard</td>" in usage
    assert f"<title>{day} · example: 1,734 tokens</title>" in usage
    assert f"<title>{day} · chat: 1,234 tokens</title>" in usage
    assert f"<title>{day} · review: 500 tokens</title>" in usage


async def test_a_journal_day_is_read_from_the_calendar(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    journal = partner_dir(harness) / "memory" / "2026-03-10.md"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(
        "# 2026-03-10\n> Day: Talked about the sea.\n\n"
        "## 21:05 · DM · with test:9 <!-- chat:test:9 -->\n> Summary: the lighthouse\n",
        encoding="utf-8",
    )
    browser, base, _ = await logged_in(harness)
    async with browser:
        year = await page(browser, base + "/journals/example?year=2026")
        assert 'href="/journals/example/2026-03-10"' in year
        day = await page(browser, base + "/journals/example/2026-03-10")
    assert "Talked about the sea." in day and "the lighthouse" in day
    assert "chat:test:9" not in day


async def test_the_audit_log_is_filtered_and_paged(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    for n in range(60):
        await harness.app.store.audit("test:1", f"admin thing{n % 2}", n=n)
    browser, base, _ = await logged_in(harness)
    async with browser:
        first = await page(browser, base + "/audit?q=thing1")
        older = re.search(r'href="(/audit\?q=thing1&amp;before=\d+)"', first)
        assert first.count("admin thing1") == 30 and "admin thing0" not in first
        assert older is None  # 30 rows match: one page
        everything = await page(browser, base + "/audit")
        link = re.search(r'href="/audit\?q=&amp;before=(\d+)"', everything)
        assert link is not None
        rest = await page(browser, base + f"/audit?before={link.group(1)}")
    assert everything.count("<tr><td>") == 50 and rest.count("<tr><td>") >= 11


async def test_status_and_export(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        status = await page(browser, base + "/")
        async with browser.get(base + "/partners/example/export") as response:
            assert response.status == 200
            assert "attachment" in response.headers["Content-Disposition"]
            data = await response.read()
    assert "test connected" in status and "Mira" in status
    assert gzip.decompress(data)  # a .tar.gz, as /admin export sends


async def test_a_stranger_user_page_shows_their_checkins(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    key = await seen_user(harness, 31, "Eve")
    await harness.app.store.set_checkins("example", key, True)
    browser, base, csrf = await logged_in(harness)
    async with browser:
        people = await page(browser, base + "/people")
    assert "example: on" in people
    assert csrf_of(people) == csrf


async def test_a_long_memory_is_paged_and_filtered(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    lines = [f"- fact {n:03d} <!-- m_1a2b3c{n:03d}0000 -->" for n in range(250)]
    (partner_dir(harness) / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    browser, base, _ = await logged_in(harness)
    async with browser:
        first = await page(browser, base + "/memory/example")
        last = await page(browser, base + "/memory/example?page=3")
        found = await page(browser, base + "/memory/example?find=FACT%20123")
    assert "250 entries" in first and "page 1 of 3" in first
    assert 'value="fact 000"' in first and 'value="fact 099"' in first
    assert 'value="fact 100"' not in first
    assert 'value="fact 249"' in last and 'value="fact 199"' not in last
    assert re.findall(r'value="(fact \d+)"', found) == ["fact 123"]


async def test_a_users_file_is_read_and_an_entry_forgotten(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    partner = harness.app.catalog.require("example")
    file = user_memory_file(partner, "test:21")
    entry = await harness.app.memory.add(file, "Ana's sister is Rita", reason="t", source="t")
    browser, base, csrf = await logged_in(harness)
    async with browser:
        listing = await page(browser, base + "/memory/example")
        assert 'href="/memory/example/users/test-21"' in listing
        shown = await page(browser, base + "/memory/example/users/test-21")
        assert 'value="Ana&#39;s sister is Rita"' in shown
        forget = {"csrf": csrf, "partner": "example", "entry": str(entry.entry_id)}
        answer = await post(browser, base + "/memory/forget", forget)
    assert "Forgotten" in answer
    assert "Rita" not in file.path.read_text(encoding="utf-8")


async def test_a_hand_edit_between_two_views_shows_on_the_second(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    memory = partner_dir(harness) / "MEMORY.md"
    memory.write_text("- Has a dog called Rex <!-- m_1a2b3c0010000 -->\n", encoding="utf-8")
    browser, base, _ = await logged_in(harness)
    async with browser:
        assert 'value="Has a dog called Rex"' in await page(browser, base + "/memory/example")
        edit_by_hand_in_the_same_tick(memory, "Rex", "Max")
        second = await page(browser, base + "/memory/example")
    assert 'value="Has a dog called Max"' in second and "Rex" not in second
