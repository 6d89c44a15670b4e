"""What a hostile CHARX zip or YAML character cannot do: unpack into gigabytes, climb out of the
partner's folder, list a million files, or grow through YAML aliases. Each is refused in one
line before anything is written."""

from __future__ import annotations

import io
import json
import random
import struct
import zipfile
from pathlib import Path

import pytest

from partners.card_archive import MAX_MEMBERS, MAX_UNCOMPRESSED_BYTES
from partners.card_format import CardError
from partners.card_shapes import MAX_YAML_BYTES
from partners.cards import plan_import, write_import
from tests import character_files as files
from tests.admin_support import admin
from tests.conftest import Harness


def refused(tmp_path: Path, raw: bytes, name: str = "bad.charx") -> str:
    """The one-line refusal of ``raw``; nothing is written."""
    root = tmp_path / "partners"
    root.mkdir(exist_ok=True)
    with pytest.raises(CardError) as caught:
        write_import(plan_import(raw, name, "bad", root), root)
    message = str(caught.value)
    assert message.startswith(f"{name}: ") and "\n" not in message
    assert list(root.iterdir()) == []
    return message


def bomb() -> bytes:
    """A real zip bomb: 40 MB of zeros deflated into about 40 kB."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("card.json", json.dumps(files.harbour_card()))
        archive.writestr("assets/icon/image/main.jpeg", bytes(40 * 1024 * 1024))
    return out.getvalue()


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    raw = bomb()
    assert len(raw) < 100_000
    message = refused(tmp_path, raw)
    assert "'assets/icon/image/main.jpeg' claims 41,943,040 bytes from" in message
    assert "zip bomb" in message


def test_a_zip_claiming_gigabytes_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    members = {"assets/noise.png": random.randbytes(100_000)}  # does not compress
    raw = files.claiming(files.charx(members=members), "assets/noise.png", 70 * 1024 * 1024)
    message = refused(tmp_path, raw)
    assert f"unpacks to more than {MAX_UNCOMPRESSED_BYTES:,} bytes" in message


def test_a_member_longer_than_it_claims_stops_at_its_claim(tmp_path: Path) -> None:
    raw = files.claiming(files.charx(), "card.json", 10)
    message = refused(tmp_path, raw)
    assert "member 'card.json' does not unpack" in message


@pytest.mark.parametrize(
    "name",
    ["../escape.png", "assets/../../escape.png", "/etc/cron.d/x", "C:/x.png", "a\\..\\b.png",
     "assets/\x01.png", "assets//x.png"],
)  # fmt: skip
def test_a_path_that_could_leave_the_folder_refuses_the_zip(tmp_path: Path, name: str) -> None:
    message = refused(tmp_path, files.zip_with_names(name))
    assert "is not a plain relative path; the zip is refused" in message


def test_too_many_members_are_refused(tmp_path: Path) -> None:
    names = [f"assets/other/image/{i}.png" for i in range(MAX_MEMBERS)]
    message = refused(tmp_path, files.zip_with_names(*names))
    assert f"the zip holds {MAX_MEMBERS + 1:,} files, over the limit of {MAX_MEMBERS:,}" in message


def test_a_zip_without_a_card_or_with_a_card_without_a_spec_is_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("assets/x.png", b"x")
    assert "a zip without a card.json, so not a CHARX card" in refused(tmp_path, out.getvalue())
    v1 = files.charx({"name": "Old", "description": "x"}, {})
    assert "card.json: not a card with a 'spec'" in refused(tmp_path, v1)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("name: Wren\ncontext: [unclosed\n", "invalid YAML (line 3: "),
        ("name: Wren\ncontext: x\n\tgreeting: y\n", "invalid YAML (line 3: "),
        ('a: &a ["lol", "lol"]\nb: &b [*a, *a]\nname: W\ncontext: *b\n', "alias (*name)"),
        ("name: W\ncontext: x\nx: " + "[" * 100 + "]" * 100 + "\n", "nested deeper than 64"),
        ("name: W\ncontext: [a, b]\n", "field 'context' should be text, not list"),
        ("name: true\ncontext: x\n", "field 'name' should be text, not a yes/no (quote it)"),
        ("name: W\ncontext: x\nborn: 2001-01-01\n", "field 'born' holds date"),
        ("name: W\ncontext: x\n" + "#" * MAX_YAML_BYTES, "over the limit of 1,048,576"),
        ("- name: W\n  context: x\n", "YAML without a name and a context or greeting"),
    ],
)
def test_bad_yaml_is_refused_in_one_line(tmp_path: Path, text: str, said: str) -> None:
    assert said in refused(tmp_path, text.encode("utf-8"), "wren.yaml")


async def test_the_owner_reads_why_a_zip_was_refused(harness: Harness) -> None:
    answer = await admin(harness, "/admin partner import", attachment=("bomb.charx", bomb()))
    assert "zip bomb, refused" in answer and "\n" not in answer
    assert not (harness.config.data_dir / "imports").exists()
    assert harness.app.catalog.get("tamsin-reed") is None


def test_only_stored_or_deflated_unencrypted_members_are_read(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_BZIP2) as archive:
        archive.writestr("card.json", json.dumps(files.harbour_card()))
    assert "'card.json' is compressed with method 12" in refused(tmp_path, out.getvalue())
    raw = files.charx(members={})
    at = raw.index(b"PK\x01\x02")  # the central directory's record: its flags say encrypted
    flags = struct.unpack("<H", raw[at + 8 : at + 10])[0] | 0x1
    encrypted = raw[: at + 8] + struct.pack("<H", flags) + raw[at + 10 :]
    assert "'card.json' is encrypted" in refused(tmp_path, encrypted)
