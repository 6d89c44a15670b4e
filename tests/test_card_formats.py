"""Characters in the shapes other apps write — CHARX, RisuAI's JPEG+ZIP, Pygmalion JSON,
oobabooga YAML — imported through ``/admin partner import`` and ``companion partners import``,
then talked with: the persona reaches the model in the system prompt and the greeting opens the
conversation, as SillyTavern places them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from partners.card_files import read_character
from partners.card_format import CardError
from partners.cards import plan_import
from partners.partner_rows import namespace_of
from tests import card_fixtures as cards
from tests import character_files as files
from tests.admin_support import admin
from tests.conftest import Harness, HarnessFactory, dm
from tests.fakes.fake_llm import Reply
from tests.test_cli_cards import run, write_config

PYGMALION = json.dumps(files.pygmalion()).encode("utf-8")


async def imported(
    harness: Harness, filename: str, raw: bytes, publish: bool = True
) -> tuple[str, str]:
    """Import through the owner's command and confirm; the preview and the partner's id."""
    preview = await admin(harness, "/admin partner import", attachment=(filename, raw))
    token = preview.split("/admin partner import confirm ")[1].split()[0]
    created = await admin(harness, f"/admin partner import confirm {token}")
    assert created.startswith("Created"), created
    partner_id = created.split("(")[-1].split(")")[0]
    if publish:
        cards.publish(harness.app.catalog.require(partner_id).dir)  # user 42 is not the owner
        harness.app.catalog.reload()
    return preview.replace("\\", ""), partner_id


async def first_turn(harness: Harness, partner_id: str) -> tuple[str, list[dict[str, str]]]:
    """Alice picks the partner and says hi: the greeting she got and what the model saw."""
    before = len(harness.channel.sent)
    await harness.send(dm(42, f"/partner {partner_id}"))
    sent = await harness.channel.wait_sent(before + 2)
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(42, "hi"))
    await harness.settle()
    return sent[before + 1].text, harness.llm.requests[-1]["messages"]


def red_enough(png: bytes) -> bool:
    pixel = Image.open(io.BytesIO(png)).convert("RGB").getpixel((3, 3))
    assert isinstance(pixel, tuple)
    return all(abs(a - b) < 30 for a, b in zip(pixel, files.MAIN_COLOR, strict=True))


@pytest.mark.parametrize(
    ("filename", "raw", "spec"),
    [
        ("tamsin.charx", files.charx(), "V3 CHARX"),
        ("tamsin.jpeg", files.jpeg_charx(), "V3 CHARX in a JPEG"),
    ],
)
async def test_a_charx_card_talks_with_its_main_icon_as_avatar(
    harness: Harness, filename: str, raw: bytes, spec: str
) -> None:
    preview, partner_id = await imported(harness, filename, raw)
    assert f"card: {spec}" in preview and "assets: 3 files" in preview
    partner = harness.app.catalog.require(partner_id)
    assert partner.avatar_image is not None and red_enough(partner.avatar_image)
    kept = sorted(str(p.relative_to(partner.dir)) for p in (partner.dir / "assets").rglob("*.*"))
    assert kept == [
        "assets/emotion/image/joy.webp",
        "assets/icon/image/other.png",
        "assets/other/image/pier.png",
    ]
    assert (partner.dir / kept[0]).read_bytes() == files.harbour_members()[kept[0]]
    greeting, messages = await first_turn(harness, partner_id)
    assert greeting == "*looks up from the easel* Oh, hello Alice! I'm Tamsin Reed."
    persona = "Tamsin Reed is a lighthouse painter who talks to Alice kindly."
    assert persona in messages[0]["content"]
    spoken = [m for m in messages if m["role"] != "system"]
    assert spoken[0] == {"role": "assistant", "content": greeting}
    assert "SECRET-CREATOR-NOTE" not in json.dumps(messages)


async def test_a_pygmalion_character_talks_as_sillytavern_converts_it(harness: Harness) -> None:
    preview, partner_id = await imported(harness, "oren.json", PYGMALION)
    assert "card: Pygmalion JSON" in preview
    greeting, messages = await first_turn(harness, partner_id)
    assert greeting == "*the lamp swings* Who goes there, Alice?"
    system = messages[0]["content"]
    assert "Oren Vale keeps the lighthouse and distrusts Alice." in system
    assert "A storm has cut the island off." in system
    assert "State your business." in system  # the example dialogue
    assert "PYG-CREATOR-NOTE" not in json.dumps(messages)
    side = json.loads((harness.app.catalog.require(partner_id).dir / "card.json").read_bytes())
    assert side["creator_notes"] == " PYG-CREATOR-NOTE"  # TavernAI's placeholder dropped
    assert side["talkativeness"] == "0.4"


async def test_an_oobabooga_character_talks_with_its_context_and_greeting(
    harness: Harness,
) -> None:
    preview, partner_id = await imported(harness, "wren.yaml", files.OOBA_YAML.encode())
    assert "card: oobabooga YAML" in preview
    greeting, messages = await first_turn(harness, partner_id)
    assert greeting == "*Wren glances up from the map.* Back already, Alice?"
    system = messages[0]["content"]
    assert "Wren is a cartographer who charts the northern fjords." in system
    assert "Wren answers briefly and never guesses a coastline." in system


@pytest.mark.parametrize(
    ("name", "raw", "identity"),
    [
        ("t.charx", files.charx(), "{{partner}} is a lighthouse painter"),
        ("t.jpg", files.jpeg_charx(), "{{partner}} is a lighthouse painter"),
        ("oren.json", PYGMALION, "{{partner}} keeps the lighthouse and distrusts {{user}}."),
        ("wren.yml", files.OOBA_YAML.encode(), "Wren is a cartographer"),
    ],
)
def test_the_command_line_imports_each_shape(
    tmp_path: Path, name: str, raw: bytes, identity: str
) -> None:
    config = write_config(tmp_path)
    source = tmp_path / name
    source.write_bytes(raw)
    assert run(config, "partners", "import", str(source), "--id", "imported", "--yes") == 0
    partner = tmp_path / "data" / "partners" / "imported"
    assert (partner / "IDENTITY.md").read_text("utf-8").startswith(identity)
    assert json.loads((partner / "card.json").read_bytes())["first_mes"]
    assert (partner / "avatar.png").exists() == name.startswith("t.")


@pytest.mark.parametrize(
    ("name", "raw", "spec"),
    [
        ("tamsin.png", files.charx(), "V3 CHARX"),  # a zip whatever its name says
        ("tamsin.bin", files.jpeg_charx(), "V3 CHARX in a JPEG"),
        ("wren.txt", files.OOBA_YAML.encode(), "oobabooga YAML"),
        ("oren.txt", PYGMALION, "Pygmalion JSON"),
        ("old.yaml", json.dumps(files.pygmalion()).encode(), "oobabooga YAML"),
    ],
)
def test_the_shape_is_told_by_the_content(name: str, raw: bytes, spec: str) -> None:
    assert read_character(raw, name).spec == spec


def test_a_pygmalion_shaped_yaml_reads_as_text_generation_webui_reads_it() -> None:
    text = "char_persona: Keeps the light.\nchar_greeting: Who goes there?\n"
    card = read_character(f"char_name: Oren\n{text}".encode(), "oren.yaml")
    assert card.spec == "oobabooga YAML" and card.data["name"] == "Oren"
    card = read_character(f'name: Oren\nchar_name: ""\n{text}'.encode(), "oren.yaml")
    assert (card.data["name"], card.data["description"]) == ("Oren", "Keeps the light.")
    assert card.data["first_mes"] == "Who goes there?"


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("x.json", b'{"title": "not a character"}'),
        ("x.yaml", b"title: not a character\n"),
        ("notes.txt", b"just some notes\n"),
        ("x.webp", files.picture("WEBP", (1, 2, 3))),
        ("x.jpg", files.picture("JPEG", (1, 2, 3))),
    ],
)
def test_an_unknown_shape_is_refused_naming_the_shapes_expected(name: str, raw: bytes) -> None:
    with pytest.raises(CardError) as caught:
        read_character(raw, name)
    message = str(caught.value)
    assert message.startswith(f"{name}: ") and "\n" not in message
    assert "CHARX" in message and "Pygmalion" in message and "oobabooga" in message


def test_assets_missing_from_the_zip_are_named_and_the_rest_imports(tmp_path: Path) -> None:
    members = files.harbour_members()
    del members["assets/icon/image/main.jpeg"]
    document = files.harbour_card()
    document["data"]["assets"].append(
        {"type": "emotion", "uri": "embeded://../../../etc/passwd", "name": "x", "ext": "png"}
    )
    plan = plan_import(files.charx(document, members), "t.charx", "t", tmp_path)
    summary = "\n".join(plan.summary())
    assert "the main icon (assets/icon/image/main.jpeg) is not in the zip; no avatar" in summary
    assert "../../../etc/passwd) is not in the zip" in summary
    assert all(".." not in name.split("/") for name in plan.files)
    assert "avatar.png" not in plan.files  # as in SillyTavern: not another icon instead
    assert "assets/icon/image/other.png" in plan.files


def test_a_charx_without_icons_inside_a_jpeg_takes_the_jpeg_as_avatar() -> None:
    document = files.harbour_card()
    document["data"]["assets"] = []
    card = read_character(files.jpeg_charx(files.charx(document, {})), "t.jpeg")
    assert card.image is not None
    assert Image.open(io.BytesIO(card.image)).size == (24, 32)
    assert card.assets == {}


def test_risu_modules_are_named_as_not_read() -> None:
    card = read_character(files.charx(members={"module.risum": b"\x00risum"}), "t.charx")
    assert any("module.risum" in note for note in card.notes)


async def test_a_charx_card_lands_whole_in_the_database(harness_factory: HarnessFactory) -> None:
    harness = await harness_factory(storage={"documents": "database"})
    assert harness.app.catalog.rows is not None
    _, partner_id = await imported(harness, "tamsin.charx", files.charx(), publish=False)
    partner = harness.app.catalog.require(partner_id)
    assert partner.avatar_image is not None and red_enough(partner.avatar_image)
    namespace = namespace_of(partner_id)
    for name in ("assets/emotion/image/joy.webp", "assets/other/image/pier.png"):
        stored = await harness.app.store.document(namespace, name)
        assert stored is not None and stored.content == files.harbour_members()[name]
