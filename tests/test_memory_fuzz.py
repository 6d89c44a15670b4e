"""Generated memory files through the memory store and prompt assembly: a BOM, CRLF or mixed line
endings, invalid UTF-8, NUL bytes, stray id comments, hand-written prose, and a 10 MB file.

Reading never raises; a write to a file that is not UTF-8 is refused with a message that says
so and leaves the bytes alone; any other write keeps every line that was there (an append-only
change), its BOM and its CRLF endings; the system prompt is built from any of them, without
entry ids, and a file far over the budget is named in the notice, never cut.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partners.catalog import PartnerCatalog
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import MemoryInputError
from partners.memory_format import BOM, clean_entry_text, read_text
from partners.persona import PromptContext, assemble_prompt, load_partner

LINES = [
    "- likes tea", "* starred bullet", "+ plus bullet", "  - indented", "\t- tabbed",
    "# Heading", "## Sub heading", "", "free prose the owner wrote", "- dup", "- dup",
    "- with id <!-- m_18c2f0a1b2c3d -->", "- broken id <!-- m_ZZ -->", "<!--", "-->",
    "- emoji 😀", "- ünïcödé", "- {{user}} placeholder", "-", "- ", "--- ", "1. numbered",
]  # fmt: skip
BOM_BYTES = BOM.encode()
BAD_BYTES = [b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\r", b"\xef\xbb\xbf"]


@st.composite
def memory_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.one_of(st.sampled_from(LINES), st.text(max_size=30)), max_size=12))
    newline = draw(st.sampled_from(["\n", "\r\n", "mixed"]))
    text = ""
    for number, line in enumerate(lines):
        ending = ("\r\n" if number % 2 else "\n") if newline == "mixed" else newline
        text += line + ending
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    raw = (BOM if draw(st.booleans()) else "") + text
    data = raw.encode("utf-8", errors="surrogatepass")
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(BAD_BYTES)) + data[at:]
    return data


def decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def body_lines(text: str) -> list[str]:
    return text.removeprefix(BOM).replace("\r\n", "\n").split("\n")


async def add_and_read(file: MemoryFile, text: str) -> tuple[list[str], str | None, list[str]]:
    """Entries before, the added entry's id (None if the store refused) and entries after."""
    store = MemoryStore()
    before = [e.text for e in await store.entries(file)]  # never raises, whatever the bytes
    try:
        result = await store.add(file, text, reason="fuzz", source="fuzz")
    except MemoryInputError as exc:
        assert "not valid UTF-8" in str(exc)
        return before, None, before
    after = [e.text for e in await store.entries(file)]
    return before, result.entry_id or "duplicate", after


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(memory_files(), st.sampled_from(["Likes green tea", "- dup", "ünïcödé 😀", "dup"]))
def test_any_memory_file_reads_and_an_add_keeps_what_was_there(
    tmp_path: Path, data: bytes, text: str
) -> None:
    path = tmp_path / "fuzz" / "MEMORY.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    entries, added, entries_after = asyncio.run(
        add_and_read(MemoryFile(path.parent, path.name), text)
    )
    if not decodes(data):
        assert added is None and path.read_bytes() == data, "a file that is not UTF-8 is left"
        return
    assert added is not None
    before, after = data.decode("utf-8"), path.read_bytes().decode("utf-8")
    assert after.startswith(BOM) == before.startswith(BOM)
    if added == "duplicate":
        assert after == before, "nothing is written for a duplicate"
    elif "\r\n" in before:
        assert after.count("\n") == after.count("\r\n"), "a CRLF file stays CRLF"
        kept = [line for line in body_lines(before) if line.strip()]
        written = [line for line in body_lines(after) if line.strip()]
        assert written[: len(kept)] == kept, "lines that were there are kept"
    else:
        assert after.startswith(before.rstrip("\n")), "what was there is kept as it was"
    assert all(entry in entries_after for entry in entries)
    assert added == "duplicate" or clean_entry_text(text) in entries_after


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(memory_files(), memory_files())
def test_any_memory_file_assembles_into_a_prompt_without_ids(
    tmp_path: Path, soul: bytes, memory: bytes
) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    directory = tmp_path / "partners" / "example"
    if not directory.exists():
        catalog.create("example")
    (directory / "SOUL.md").write_bytes(soul)
    (directory / "MEMORY.md").write_bytes(memory)
    partner = load_partner(directory)
    user_memory = read_text(directory / "MEMORY.md")
    context = PromptContext(user="Alice", session="s", platform="test", user_memory=user_memory)
    prompt = assemble_prompt(partner, context, budget=20_000, notice=True)
    assert "<!-- m_18c2f0a1b2c3d -->" not in prompt.text
    leading = soul.startswith(BOM_BYTES) + memory.startswith(BOM_BYTES)
    if (soul + memory).count(BOM_BYTES) == leading:
        assert BOM not in prompt.text, "a file's byte order mark is not text"


TEN_MB = 10 * 1024 * 1024


async def test_a_10_mb_memory_file_is_named_in_the_notice_not_cut_and_still_takes_an_add(
    tmp_path: Path,
) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    partner = catalog.create("example")
    line = "- a fact the owner pasted in, one of very many, with some padding to be long\n"
    big = line * (TEN_MB // len(line) + 1)
    (partner.dir / "MEMORY.md").write_text(big, encoding="utf-8")
    prompt = assemble_prompt(
        partner,
        PromptContext(user="Alice", session="s", platform="test"),
        budget=20_000,
        notice=True,
    )
    assert prompt.over_budget and "MEMORY.md" in prompt.heaviest
    assert "over the budget of 20000" in prompt.text
    assert prompt.text.count("a fact the owner pasted in") == big.count("\n")

    store = MemoryStore()
    file = MemoryFile(partner.dir, "MEMORY.md")
    result = await store.add(file, "One more fact", reason="fuzz", source="fuzz")
    after = (partner.dir / "MEMORY.md").read_text(encoding="utf-8")
    assert after.startswith(big) and after.endswith(f"- One more fact <!-- {result.entry_id} -->\n")
