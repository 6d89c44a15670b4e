"""The owner's web page in a real headless Chromium: logging in through the one-time link,
editing a persona that changed meanwhile, approving a pairing, forgetting an entry and reading
a usage chart — plus screenshots of every page at desktop and phone widths."""

from __future__ import annotations

import time

from playwright.async_api import Browser, expect

from bot.gateway.access import APPROVED_WELCOME
from partners.memory import MemoryFile
from tests.admin_support import partner_dir
from tests.browser_support import PHONE, Tab, chromium, log_in, open_tab
from tests.conftest import Harness, HarnessFactory, dm
from tests.test_web_journals import DAY as HOSTILE_DAY
from tests.test_web_journals import HOSTILE
from tests.web_support import base_of, login_link, web_harness

__all__ = ["chromium"]  # the fixture, used by name

STRANGER = 808


async def logged_in_tab(harness: Harness, browser: Browser) -> tuple[Tab, str]:
    link = await login_link(harness)
    tab = await open_tab(browser)
    await log_in(tab, link)
    return tab, base_of(link)


async def test_the_owner_logs_in_through_the_one_time_link(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    harness = await web_harness(harness_factory)
    link = await login_link(harness)
    tab = await open_tab(chromium, PHONE)
    await tab.page.goto(link)
    await tab.screenshot("login")
    await tab.page.get_by_role("button", name="Log in").click()
    await expect(tab.page.get_by_role("heading", name="Status")).to_be_visible()
    await expect(tab.page.get_by_text("test connected")).to_be_visible()
    cookies = await tab.page.context.cookies()
    assert [c["httpOnly"] for c in cookies] == [True]
    # the same link a second time, in another browser: spent
    other = await open_tab(chromium)
    await other.page.goto(link)
    await other.page.get_by_role("button", name="Log in").click()
    await expect(other.page.get_by_text("expired or was used")).to_be_visible()
    await tab.page.get_by_role("button", name="Log out").click()
    await expect(tab.page.get_by_role("heading", name="Logged out")).to_be_visible()
    await tab.page.goto(base_of(link) + "/partners")
    await expect(tab.page.get_by_text("/admin web")).to_be_visible()
    assert tab.errors == [] and other.errors == []


async def test_a_persona_edit_that_crossed_a_change_keeps_both(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    harness = await web_harness(harness_factory)
    soul = partner_dir(harness) / "SOUL.md"
    tab, base = await logged_in_tab(harness, chromium)
    await tab.page.goto(base + "/partners/example/files/SOUL.md")
    editor = tab.page.locator("textarea[name=text]")
    await editor.fill("You keep a lighthouse and count the ships.\n")
    await tab.page.get_by_role("button", name="Show the diff").click()
    await expect(tab.page.locator("pre.diff")).to_contain_text("+You keep a lighthouse")
    # a review writes the file while the owner is still editing
    soul.write_text("You love the sea.\n", encoding="utf-8")
    await tab.page.get_by_role("button", name="Save").click()
    await expect(tab.page.get_by_role("alert")).to_contain_text("Not saved")
    await expect(editor).to_have_value("You keep a lighthouse and count the ships.\n")
    await expect(tab.page.locator("pre.file")).to_contain_text("You love the sea.")
    await tab.screenshot("persona-conflict")
    assert soul.read_text(encoding="utf-8") == "You love the sea.\n"
    # the owner merges both and saves against the version now on disk
    await editor.fill("You love the sea.\nYou keep a lighthouse.\n")
    await tab.page.get_by_role("button", name="Save").click()
    await expect(tab.page.get_by_role("status")).to_contain_text("Saved SOUL.md")
    assert soul.read_text(encoding="utf-8") == "You love the sea.\nYou keep a lighthouse.\n"
    assert tab.errors == []


async def test_a_friend_waiting_in_pairing_is_approved(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    harness = await harness_factory(
        web={"enabled": True, "port": 0}, access={"dm_policy": "pairing"}
    )
    await harness.send(dm(STRANGER, "hi, it's Ana", name="Ana"))
    await harness.settle()
    tab, base = await logged_in_tab(harness, chromium)
    await tab.page.goto(base + "/people")
    row = tab.page.locator("tr", has_text="Ana").first
    await expect(row).to_be_visible()
    await tab.screenshot("people")
    await row.get_by_role("button", name="Approve").click()
    await expect(tab.page.get_by_role("status")).to_contain_text(f"Approved test:{STRANGER}")
    await expect(tab.page.get_by_text("Nobody is waiting.")).to_be_visible()
    assert harness.channel.texts(str(STRANGER))[-1] == APPROVED_WELCOME
    assert tab.errors == []


async def test_a_wrong_memory_entry_is_forgotten(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    harness = await web_harness(harness_factory)
    memory = harness.app.memory
    file = MemoryFile(partner_dir(harness), "MEMORY.md")
    kept = await memory.add(file, "Ana plays the cello", reason="test", source="test")
    wrong = await memory.add(file, "Ana hates the sea", reason="test", source="test")
    tab, base = await logged_in_tab(harness, chromium)
    await tab.page.goto(base + "/memory/example")
    row = tab.page.locator(f"tr#{wrong.entry_id}")
    await expect(row.locator("input[name=text]")).to_have_value("Ana hates the sea")
    await tab.screenshot("memory")
    await row.get_by_role("button", name="Forget").click()
    await expect(tab.page.get_by_role("status")).to_contain_text("Forgotten")
    await expect(tab.page.locator(f"tr#{wrong.entry_id}")).to_have_count(0)
    await expect(tab.page.locator(f"tr#{kept.entry_id}")).to_have_count(1)
    text = file.path.read_text(encoding="utf-8")
    assert "hates the sea" not in text and "cello" in text
    assert tab.errors == []


async def test_last_weeks_cost_is_read_from_the_chart(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    prices = {"price_prompt_per_million": 1.0, "price_completion_per_million": 4.0}
    harness = await harness_factory(web={"enabled": True, "port": 0}, llm=prices)
    store = harness.app.store
    now = time.time()
    yesterday = harness.config.usage_day(now - 86_400)
    today = harness.config.usage_day(now)
    await store.add_usage(yesterday, "example", "chat", "m", 1000, 0)
    await store.add_usage(today, "example", "chat", "m", 1500, 500)
    tab, base = await logged_in_tab(harness, chromium)
    await tab.page.goto(base + "/usage?days=7")
    bars = tab.page.locator("#by-partner svg.chart rect")
    await expect(bars).to_have_count(2)
    titles = await bars.locator("title").all_text_contents()
    assert titles == [f"{yesterday} · example: 1,000 tokens", f"{today} · example: 2,000 tokens"]
    first, second = [await bar.bounding_box() for bar in await bars.all()]
    assert first and second
    assert abs(second["height"] - 2 * first["height"]) < 1.5  # drawn to scale
    assert second["y"] < first["y"]
    costs = await tab.page.locator("#cost svg.chart rect title").all_text_contents()
    assert costs == [f"{yesterday} · estimated cost: 0.0010", f"{today} · estimated cost: 0.0035"]
    await expect(tab.page.get_by_text("Total: 0.0045")).to_be_visible()
    await tab.screenshot("usage")
    assert tab.errors == []


async def test_a_hostile_journal_day_runs_nothing_in_the_browser(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    harness = await web_harness(harness_factory)
    journal = partner_dir(harness) / "memory" / f"{HOSTILE_DAY}.md"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(HOSTILE, encoding="utf-8")
    tab, base = await logged_in_tab(harness, chromium)
    dialogs: list[str] = []
    tab.page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await tab.page.goto(f"{base}/journals/example/{HOSTILE_DAY}")
    await expect(tab.page.get_by_role("heading", name="Key facts")).to_be_visible()
    await expect(tab.page.get_by_text("<script>alert('day')</script>")).to_be_visible()
    links = tab.page.locator(".journal a")
    assert await links.evaluate_all("links => links.map(a => a.href)") == [
        "https://tracker.example/p.png"
    ]
    assert await tab.page.locator("script, img, style, iframe").count() == 0
    await tab.screenshot("journal-hostile")
    assert dialogs == [] and tab.errors == []


async def test_every_page_at_desktop_and_phone_widths(
    harness_factory: HarnessFactory, chromium: Browser
) -> None:
    harness = await web_harness(harness_factory)
    journal = partner_dir(harness) / "memory" / "2026-11-24.md"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(
        "# 2026-11-24\n> Day: Mira and Ana planned a trip to the coast.\n\n"
        "## 20:10 · DM · with test:9 <!-- chat:test:9 -->\n> Summary: a trip to the coast\n",
        encoding="utf-8",
    )
    day = harness.config.usage_day(time.time())
    await harness.app.store.add_usage(day, "example", "chat", "m", 900, 90)
    file = MemoryFile(partner_dir(harness), "MEMORY.md")
    await harness.app.memory.add(
        file, "Ana's cello teacher is called Ms Okonkwo-Lindqvist", reason="t", source="t"
    )
    await harness.send(dm(STRANGER, "hello", name="Ana Beatriz dos Santos Oliveira"))
    await harness.settle()
    session = await harness.app.store.open_session(f"test:{STRANGER}", "example")
    assert session is not None
    tab, base = await logged_in_tab(harness, chromium)
    pages = {
        "status": "/",
        "partners": "/partners",
        "partner": "/partners/example",
        "editor": "/partners/example/files/SOUL.md",
        "owner-memory": "/memory",
        "partner-memory": "/memory/example",
        "people-list": "/people",
        "usage-list": "/usage",
        "journal-year": "/journals/example?year=2026",
        "journal-day": "/journals/example/2026-11-24",
        "sessions": "/sessions/example",
        "transcript": f"/sessions/example/{session.id}",
        "audit": "/audit",
    }
    for name, path in pages.items():
        await tab.page.goto(base + path)
        await expect(tab.page.locator("h1")).to_be_visible()
        await tab.screenshot(name)
        await tab.page.set_viewport_size(PHONE)
        width = await tab.page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{name} scrolls sideways on a phone ({width}px)"
        await tab.page.set_viewport_size({"width": 1280, "height": 900})
    assert tab.errors == []
