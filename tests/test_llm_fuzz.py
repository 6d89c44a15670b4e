"""Generated model answers through the whole chat loop: tool calls with invalid JSON, unknown or
owner-only tool names, missing and mistyped fields, hostile paths, NUL bytes, huge strings and
lone surrogates, then a final answer of any text (or none).

Whatever the model sends, the turn ends with exactly one reply to the user, no turn fails,
every tool result goes back to the model as text, and nothing stored before is lost: the
owner's memory, another partner's memory and the user's existing entry stay as they were,
and every memory file still reads as entries.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.turn.runner import APOLOGY
from partners.memory import MemoryFile
from partners.memory_format import BULLET, ENTRY_ID
from tests.conftest import Harness, HarnessFactory, dm
from tests.fakes.fake_llm import Malformed, Reply, ToolCallSpec

USER = 42
KNOWN_ENTRY = "- Alice likes jasmine tea <!-- m_1a2b3c4d5e6f7 -->\n"
TOOL_NAMES = [
    "partner_read", "partner_memorize", "partner_search", "read_memory", "write_memory",
    "consult_partner", "", "PARTNER_READ", "partner_read ", "../../etc/passwd", "admin",
    "/admin forget", "x" * 300, "partner\x00read",
]  # fmt: skip
HOSTILE = [
    "", " ", "../other/MEMORY", "../../owner/MEMORY.md", "/etc/passwd", "users/../../x",
    "C:\\Windows\\system32", "m_1a2b3c4d5e6f7\x00", "a\x00b", "\ud800", "x" * 241,
    "y" * 25_000, "<!-- m_123 -->", "- nested - bullet", "{{partner}}", "\r\n- injected",
]  # fmt: skip
values = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=40),
    st.integers(),
    st.floats(allow_nan=True),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=3),
)
FIELDS = ["op", "text", "target_id", "reason", "query", "limit", "partner", "question", "user"]
argument_dicts = st.dictionaries(
    st.sampled_from(FIELDS),
    st.one_of(values, st.sampled_from(["add", "edit", "remove", "ADD", "delete"])),
    max_size=5,
)
broken_json = st.sampled_from(
    ["{", '{"op": ', "null", "[]", '"text"', "123", '{"a": 1}{"b": 2}', "NaN", "{'op': 'add'}",
     '{"text": "\\ud800"}', '{"op": "add", "text": "\\u0000"}', "\x00", " " * 10, "[" * 500]
)  # fmt: skip
arguments = st.one_of(argument_dicts, broken_json, st.text(max_size=30))


NOT_COMPLETIONS = [
    {}, {"choices": []}, {"choices": [{}]}, {"error": {"message": "quota exceeded"}}, [1, 2],
    "<html><body>502 Bad Gateway</body></html>", "", {"choices": [{"message": {"content": 5}}]},
    {"choices": [{"message": {"content": None, "tool_calls": "none"}}]},
    {"choices": [{"message": {"content": None, "tool_calls": [{"id": "c", "type": "function",
                                                              "function": {"name": None}}]}}]},
]  # fmt: skip
"""200 answers that are not chat completions: a proxy's page, a bare error, wrong types."""
SURROGATES = [
    Reply(tool_calls=[ToolCallSpec("partner_memorize", '{"op": "add", "text": "a \\ud800 b"}'),
                      ToolCallSpec("partner_search", '{"query": "\\udfff"}')]),
    Reply(text="half an emoji \ud83d"),
]  # fmt: skip
OVERSIZED = [
    Reply(tool_calls=[ToolCallSpec("partner_memorize", {"op": "add", "text": "z" * 30_000}),
                      ToolCallSpec("partner_memorize", {"op": "add", "text": "w" * 241}),
                      ToolCallSpec("partner_search", {"query": "q" * 19_000, "limit": 10**30})]),
    Reply(text="x" * 20_000),
]  # fmt: skip


@st.composite
def tool_calls(draw: st.DrawFn) -> ToolCallSpec:
    name = draw(st.one_of(st.sampled_from(TOOL_NAMES), st.text(max_size=12)))
    raw = draw(arguments)
    if isinstance(raw, dict):
        raw = json.dumps(raw)  # keeps "\ud800" and NUL escaped, as a provider would send them
    call_id = draw(st.one_of(st.none(), st.sampled_from(["call_1", "dup", ""])))
    return ToolCallSpec(name, raw, id=call_id)


@st.composite
def model_turns(draw: st.DrawFn) -> list[Reply]:
    rounds = draw(st.lists(st.lists(tool_calls(), min_size=1, max_size=3), max_size=3))
    replies = [Reply(tool_calls=calls, text=draw(st.one_of(st.none(), st.text(max_size=20))))
               for calls in rounds]  # fmt: skip
    final = draw(st.one_of(st.none(), st.text(max_size=200), st.sampled_from(HOSTILE)))
    last = draw(
        st.one_of(st.just(Reply(text=final)), st.sampled_from(NOT_COMPLETIONS).map(Malformed))
    )
    return [*replies, last]


async def test_any_model_answer_ends_in_one_reply_and_loses_nothing(
    harness_factory: HarnessFactory,
) -> None:
    harness: Harness = await harness_factory(chunk_chars=1_000_000)  # one reply, one send
    scripts: list[list[Reply]] = []

    @settings(
        max_examples=120,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(model_turns())
    @example(SURROGATES)
    @example(OVERSIZED)
    def collect(script: list[Reply]) -> None:
        scripts.append(script)

    collect()
    app = harness.app
    other = app.catalog.create("other")
    other_file = MemoryFile(other.dir, "MEMORY.md")
    await app.memory.add(other_file, "Other's secret recipe", reason="", source="t")
    await app.memory.add(app.owner_file, "The owner's birthday is 1 June", reason="", source="t")
    user_file = app.catalog.require("example").dir / "users" / f"test-{USER}.md"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text(KNOWN_ENTRY, encoding="utf-8")
    protected = {path: path.read_bytes() for path in (other_file.path, app.owner_file.path)}
    await app.store.upsert_chat(f"test:{USER}", "test", str(USER), None, "dm", None)
    await app.store.select_partner(f"test:{USER}", "example")  # two partners now: pick one

    for number, script in enumerate(scripts):
        before = len(harness.channel.sent)
        first_request = len(harness.llm.requests)
        harness.llm.script(*script)
        await harness.send(dm(USER, f"message {number}"))
        await harness.settle()
        assert harness.llm.queued == 0, f"example {number}: the turn stopped early"
        assert len(harness.channel.sent) == before + 1, f"example {number}: {script!r:.300}"
        for request in harness.llm.requests[first_request:]:
            for message in request["messages"]:
                if message["role"] == "tool":
                    assert isinstance(message["content"], str) and message["content"]

    assert app.dispatcher.turns_failed == 0
    assert {path: path.read_bytes() for path in protected} == protected
    assert KNOWN_ENTRY.strip() in user_file.read_text(encoding="utf-8")
    for path in app.config.data_dir.rglob("*.md"):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert "<!-- m_" not in line or (BULLET.match(line) and ENTRY_ID.search(line)), line


@pytest.mark.parametrize("body", NOT_COMPLETIONS)
async def test_an_answer_that_is_not_a_completion_gets_one_apology(
    harness: Harness, body: object
) -> None:
    harness.llm.script(Malformed(body))
    await harness.send(dm(USER, "hello"))
    await harness.settle()
    assert harness.channel.texts() == [APOLOGY]
    assert harness.app.dispatcher.turns_failed == 0
