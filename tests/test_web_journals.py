"""A journal day on the web page: its Markdown shown as formatted HTML, with nothing in it
able to run — raw HTML is text, links go only to http, https and mailto, images are not
fetched and bidi controls are gone."""

from __future__ import annotations

import re

from bot.web.journal_html import journal_html
from bot.web.security import CONTENT_SECURITY_POLICY
from tests.admin_support import partner_dir
from tests.conftest import HarnessFactory
from tests.test_web_auth import logged_in
from tests.web_support import web_harness

DAY = "2026-03-10"
HOSTILE = (
    f"# {DAY}\n> Day: <script>alert('day')</script>\n\n"
    "## 21:05 · DM · with test:9 <!-- chat:test:9 -->\n"
    "> Summary: <img src=x onerror=alert(1)>\n\n"
    "### Key facts\n"
    "- [tap here](javascript:alert(document.cookie)) and [me](JaVaScRiPt:alert(2))\n"
    '- <a href="javascript:alert(3)">raw</a> <javascript:alert(4)>\n'
    "- [data](data:text/html;base64,PHNjcmlwdD5hbGVydCg1KTwvc2NyaXB0Pg==)\n"
    "- [ref][bad] and ![pixel](https://tracker.example/p.png)\n"
    "- \u202egnp.exe and <style>body{display:none}</style>\n\n"
    "[bad]: vbscript:msgbox(6)\n"
)


def test_journal_markdown_becomes_formatted_html() -> None:
    html = journal_html(
        "## 21:05 · DM\n> Summary: **the lighthouse**\n\n### Key facts\n- likes *tea*\n"
    )
    assert '<h3 dir="auto">21:05 · DM</h3>' in html
    assert "<strong>the lighthouse</strong>" in html
    assert '<h4 dir="auto">Key facts</h4>' in html
    assert "<li" in html and "<em>tea</em>" in html


def test_journal_links_go_only_to_http_https_and_mailto() -> None:
    html = journal_html(
        "[site](https://example.org/a?b=1) [plain](http://example.org) [mail](mailto:a@b.c) "
        "[here](/logout) [ftp](ftp://example.org) [file](file:///etc/passwd)"
    )
    assert re.findall(r'href="([^"]*)"', html) == [
        "https://example.org/a?b=1",
        "http://example.org",
        "mailto:a@b.c",
    ]
    assert html.count('rel="noopener noreferrer nofollow"') == 3


def test_hostile_journal_text_is_shown_never_run() -> None:
    html = journal_html(HOSTILE)
    assert re.findall(r"<(\w+)", html) and set(re.findall(r"<(\w+)", html)) <= {
        "h2", "h3", "h4", "blockquote", "p", "ul", "li", "a", "strong", "em", "code",
    }  # fmt: skip
    # of all those links only the https one is a link; the image is not fetched, only linked
    assert re.findall(r'href="([^"]*)"', html) == ["https://tracker.example/p.png"]
    assert "&lt;script&gt;alert('day')&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "\u202e" not in html and "gnp.exe" in html


async def test_a_hostile_journal_day_is_served_as_text_under_the_policy(
    harness_factory: HarnessFactory,
) -> None:
    harness = await web_harness(harness_factory)
    journal = partner_dir(harness) / "memory" / f"{DAY}.md"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(HOSTILE, encoding="utf-8")
    browser, base, _ = await logged_in(harness)
    async with browser, browser.get(f"{base}/journals/example/{DAY}") as response:
        assert response.status == 200
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        page = await response.text()
    journal_part = page.split('class="journal"', 1)[1]
    assert "<script" not in page and "<img" not in page and "<style" not in page
    assert re.findall(r'href="([^"]*)"', journal_part) == ["https://tracker.example/p.png"]
    assert "<h3" in journal_part and "chat:test:9" not in page
