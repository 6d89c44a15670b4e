"""The large exports ``companion import`` reads (Telegram Desktop's ``result.json``,
ChatGPT's ``conversations.json``) are streamed, never held whole: reading one holds a small
part of it however large it is, every message is bounded while it is read, and a file that is
not JSON is refused with where it broke, before anything is stored."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from bot.cli.history_formats import read, streaming
from bot.cli.history_formats.messages import BadHistory, Choices
from tests.test_cli import companion
from tests.test_cli_history_import import new_partner, stored

SENDERS = (("Ana", "user5"), ("Mira Bot", "user777"))


def message(number: int, text: Any = None, **extra: Any) -> dict[str, Any]:
    name, ident = SENDERS[number % 2]
    return {
        "id": number, "type": "message", "date": "2023-11-14T21:13:20",
        "date_unixtime": str(1_699_996_400 + number), "from": name, "from_id": ident,
        "text": f"message {number} about the lighthouse" if text is None else text,
        "text_entities": [], **extra,
    }  # fmt: skip


def export(path: Path, messages: list[dict[str, Any]], prefix: bytes = b"") -> Path:
    """A one-chat result.json laid out as Telegram Desktop writes it: a message a line."""
    lines = ",\n".join(json.dumps(m, ensure_ascii=False) for m in messages)
    head = '{\n "name": "Mira",\n "type": "personal_chat",\n "id": 4815162342,\n "messages": [\n'
    path.write_bytes(prefix + (head + lines + "\n ]\n}\n").encode())
    return path


def test_reading_an_export_holds_a_small_part_of_it(tmp_path: Path) -> None:
    long = "we walked to the lighthouse and counted the puffins on the rocks " * 25
    source = export(tmp_path / "result.json", [message(n, f"{n} {long}") for n in range(1, 3001)])
    size = source.stat().st_size
    assert size > streaming.MAX_ITEM_BYTES  # larger than any one message may be, and read
    tracemalloc.start()
    try:
        count = 0
        for imported in read(source, "telegram", Choices(as_user="Ana")):
            count += 1
            assert imported.text.startswith(f"{count} ")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 3000
    assert peak < size / 10, f"{peak:,} bytes held reading a {size:,}-byte file"


async def test_a_broken_export_is_refused_at_its_line_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    config = await new_partner(tmp_path)
    lines = export(tmp_path / "r.json", [message(n) for n in range(1, 2001)]).read_text()
    broken = lines.replace('{"id": 1500, ', '{"id": 1500 ')  # a comma missing, far in
    (tmp_path / "r.json").write_text(broken)
    line = broken[: broken.index('{"id": 1500 ')].count("\n") + 1
    code, _, err = await companion(config, "import", "example", str(tmp_path / "r.json"))
    # the parser stops at the end of the key after the missing comma, column 18: '"type"'
    assert code == 2 and f"not JSON (line {line}, column 18: parse error" in err, err
    assert "Traceback" not in err
    assert await stored(tmp_path) == []


async def test_a_message_out_of_bounds_is_refused_naming_it_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    config = await new_partner(tmp_path)
    huge = "x" * (streaming.MAX_ITEM_BYTES + 2 * streaming.CHUNK)  # checked a read at a time
    source = export(tmp_path / "huge.json", [message(1), message(2), message(3, huge)])
    code, _, err = await companion(config, "import", "example", str(source), "--as-user", "Ana")
    assert code == 2 and "message 3: more than 4,194,304 bytes of JSON in one message" in err
    nested: Any = "deep"
    for _ in range(streaming.MAX_DEPTH):
        nested = [nested]
    source = export(tmp_path / "deep.json", [message(1), message(2, nested)])
    code, _, err = await companion(config, "import", "example", str(source), "--as-user", "Ana")
    assert code == 2 and "message 2: JSON nested deeper than 64 levels" in err, err
    assert await stored(tmp_path) == []


def test_an_export_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    source = export(tmp_path / "bom.json", [message(1), message(2)], prefix=b"\xef\xbb\xbf")
    texts = [m.text for m in read(source, "telegram", Choices(as_user="Ana"))]
    assert texts == ["message 1 about the lighthouse", "message 2 about the lighthouse"]


@pytest.mark.parametrize(
    ("format", "content", "refusal"),
    [
        ("telegram", b"[1, 2]", "expected Telegram Desktop's result.json (a JSON object)"),
        ("chatgpt", b'{"mapping": {}}', "expected ChatGPT's conversations.json (a JSON list)"),
        ("chatgpt", b'[\n {"title": "Tomatoes",\n  "mapping": {]}\n]', "not JSON (line 3, column"),
        ("telegram", b'{"name": "Mira", "messages": [', "(line 1, column 30: parse error: premat"),
    ],
)  # fmt: skip
def test_a_file_of_the_wrong_shape_is_refused_saying_what_was_expected(
    tmp_path: Path, format: str, content: bytes, refusal: str
) -> None:
    source = tmp_path / "history.json"
    source.write_bytes(content)
    with pytest.raises(BadHistory, match="^" + str(source)) as refused:
        list(read(source, format, Choices(as_user="Ana")))
    assert refusal in str(refused.value)


def test_a_file_changed_between_its_two_reads_is_refused(tmp_path: Path) -> None:
    source = export(tmp_path / "result.json", [message(1), message(2)])
    with streaming.opened(source) as (_, stamp):
        pass
    source.write_text(source.read_text().replace("lighthouse", "harbour"))
    with pytest.raises(BadHistory, match="changed while it was read"):
        list(streaming.items(source, "messages.item", stamp))
