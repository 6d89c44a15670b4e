"""Sessions on the web page: a partner's sessions as ``/admin sessions`` lists them, one
session's transcript as ``/admin transcript`` gives it to the assistant (labelled, its newest
part only), and the review that ``/admin review`` runs, as a button — audited as web:owner."""

from __future__ import annotations

import json
import re

from markupsafe import escape

from bot.turn.transcripts import CUT_MARKER, END_MARKER, transcript_label
from tests.admin_support import partner_dir, say
from tests.conftest import HarnessFactory
from tests.fakes.fake_llm import Reply
from tests.test_web_auth import logged_in
from tests.test_web_pages import page, post
from tests.web_support import web_harness


async def test_a_partners_sessions_are_listed_and_one_is_read(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    await say(harness, 42, "I am planning a trip to <b>Kyoto</b>", "How exciting!")
    await say(harness, 43, "hello from Bob", "hi Bob", name="Bob")
    alice = await harness.app.store.open_session("test:42", "example")
    assert alice is not None
    browser, base, _ = await logged_in(harness)
    async with browser:
        listing = await page(browser, base + "/sessions/example")
        only_bob = await page(browser, base + "/sessions/example?user=test:43")
        transcript = await page(browser, base + f"/sessions/example/{alice.id[:8]}")
    assert f'href="/sessions/example/{alice.id}"' in listing
    assert "I am planning a trip to &lt;b&gt;Kyoto&lt;/b&gt;" in listing
    assert "hello from Bob" in listing and "2 messages" in listing
    assert "hello from Bob" in only_bob and "Kyoto" not in only_bob
    label = transcript_label("Mira", "I am planning a trip to <b>Kyoto</b>")
    assert str(escape(label)) in transcript
    assert "Alice: I am planning a trip to &lt;b&gt;Kyoto&lt;/b&gt;" in transcript
    assert "Mira: How exciting!" in transcript and END_MARKER in transcript
    assert "Bob" not in transcript.split("</nav>", 1)[1]
    [row] = await harness.app.store.audit_rows("web transcript")
    assert row["actor"] == "web:owner" and row["detail"]["session"] == alice.id


async def test_a_long_transcript_shows_its_newest_part(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    for i in range(40):
        await say(harness, 44, f"story part {i} " + "word " * 400, f"ok {i}", name="Cy")
    session = await harness.app.store.open_session("test:44", "example")
    assert session is not None
    browser, base, _ = await logged_in(harness)
    async with browser:
        shown = await page(browser, base + f"/sessions/example/{session.id}")
    assert CUT_MARKER in shown
    assert "Cy: story part 39" in shown and "Cy: story part 0 " not in shown


async def test_an_unknown_or_malformed_session_is_not_found(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    browser, base, _ = await logged_in(harness)
    async with browser:
        for path, says in (
            ("/sessions/example/abcdef12", "has no session abcdef12"),
            ("/sessions/example/xyz", "not a session id"),
            ("/sessions/ghost", "no partner"),
        ):
            async with browser.get(base + path) as response:
                assert response.status == 404, path
                assert says in await response.text(), path


async def test_review_now_is_a_button(harness_factory: HarnessFactory) -> None:
    harness = await web_harness(harness_factory)
    await say(harness, 42, "I went hiking in the Alps this weekend", "It was great")
    harness.llm.script(
        Reply(
            text=json.dumps(
                {
                    "journal": {"summary": "Alice went hiking in the Alps"},
                    "memory": [{"file": "MEMORY.md", "op": "add", "text": "Alice hikes"}],
                }
            )
        )
    )
    browser, base, csrf = await logged_in(harness)
    async with browser:
        listing = await page(browser, base + "/sessions/example")
        assert re.search(r'<form method="post" action="/sessions/example/review"', listing)
        answer = await post(browser, base + "/sessions/example/review", {"csrf": csrf})
        again = await post(browser, base + "/sessions/example/review", {"csrf": csrf})
    assert "Reviewed 1 session(s) of Mira: 1 journal entr(ies)." in answer
    assert "Nothing new to review for Mira." in again
    assert list((partner_dir(harness) / "memory").glob("*.md"))
    rows = await harness.app.store.audit_rows("admin review")
    assert [r["actor"] for r in rows] == ["web:owner", "web:owner"]
