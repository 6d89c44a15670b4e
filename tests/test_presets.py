"""preset.yml as a typed file:
read like config.toml — an unknown key refused with a suggestion, every error naming the file
and the key — and edited from the chat through a round-trip YAML library, so that everything
outside the edited key stays as the owner wrote it, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from partners.persona import PartnerError, load_partner
from tests.admin_support import admin, partner_dir
from tests.conftest import Harness

PRESET = """\
# Kai: a partner for late-night talks
name: Kai   # what people call it
description: |
  A night owl who listens.
  Remembers the small things.
order: 3
# model: gpt-4o          # defaults to llm.model

proactive:
  # only in the evening
  enabled: false
  window: "18:00-23:00"
tools:
  deny: [web_*]
"""
DESCRIPTION = """\
description: |
  A night owl who listens.
  Remembers the small things.
"""


def partner_with(tmp_path: Path, preset: str) -> Path:
    directory = tmp_path / "kai"
    directory.mkdir()
    (directory / "preset.yml").write_text(preset, encoding="utf-8")
    return directory


def load_error(tmp_path: Path, preset: str) -> str:
    directory = partner_with(tmp_path, preset)
    with pytest.raises(PartnerError) as raised:
        load_partner(directory)
    return str(raised.value)


# ---- reading ---------------------------------------------------------------------------------


def test_the_whole_preset_loads_as_typed_values(tmp_path: Path) -> None:
    preset = load_partner(partner_with(tmp_path, PRESET)).preset
    assert preset.name == "Kai" and preset.order == 3
    assert preset.description == "A night owl who listens.\nRemembers the small things."
    assert preset.tools_deny == ("web_*",)
    assert preset.extra["proactive"]["window"] == "18:00-23:00"


def test_an_unknown_key_is_refused_with_what_was_meant(tmp_path: Path) -> None:
    message = load_error(tmp_path, "name: Kai\ndescripton: typo\n")
    assert str(tmp_path / "kai" / "preset.yml") in message
    assert "descripton" in message and "did you mean 'description'" in message


def test_an_unknown_nested_key_is_named_with_its_path(tmp_path: Path) -> None:
    message = load_error(tmp_path, "name: Kai\nproactive:\n  enabeld: true\n")
    assert "proactive.enabeld" in message and "did you mean 'enabled'" in message


@pytest.mark.parametrize(
    ("preset", "key"),
    [
        ("daily_token_budget: lots\n", "daily_token_budget"),
        ("memory_scope: everyone\n", "memory_scope"),
        ("timezone: Mars/Olympus\n", "timezone"),
        ("proactive:\n  window: evenings\n", "proactive.window"),
        ("proactive:\n  max_per_day: -1\n", "proactive.max_per_day"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path: Path, preset: str, key: str) -> None:
    message = load_error(tmp_path, "name: Kai\n" + preset)
    assert message.startswith(f"{tmp_path / 'kai' / 'preset.yml'}: {key}:")


def test_bad_yaml_names_the_file_and_the_line(tmp_path: Path) -> None:
    message = load_error(tmp_path, "name: Kai\ndescription: [unclosed\norder: 1\n")
    assert str(tmp_path / "kai" / "preset.yml") in message
    assert "line" in message and "<unicode string>" not in message


# ---- editing from the chat -------------------------------------------------------------------


async def kai(harness: Harness) -> Path:
    directory = partner_dir(harness).parent / "kai"
    directory.mkdir()
    (directory / "preset.yml").write_text(PRESET, encoding="utf-8")
    harness.app.catalog.reload()
    return directory / "preset.yml"


async def test_setting_a_block_scalar_description_replaces_it_and_keeps_every_other_byte(
    harness: Harness,
) -> None:
    path = await kai(harness)
    answer = await admin(harness, "/admin partner set kai description Quiet, kind, awake at 3am.")
    assert "kai: description is now Quiet, kind, awake at 3am." in answer
    text = path.read_text(encoding="utf-8")
    assert text == PRESET.replace(DESCRIPTION, "description: Quiet, kind, awake at 3am.\n")
    assert harness.app.catalog.require("kai").preset.description == "Quiet, kind, awake at 3am."


@pytest.mark.parametrize(
    ("command", "before", "after", "check"),
    [
        (
            "model gpt-4o-mini --force",  # not a model the fake serves
            "tools:",
            "model: gpt-4o-mini\ntools:",
            lambda p: p.model == "gpt-4o-mini",
        ),
        (
            "memory_scope shared",
            "tools:",
            "memory_scope: shared\ntools:",
            lambda p: p.memory_scope == "shared",
        ),
        (
            "daily_token_budget 200000",
            "tools:",
            "daily_token_budget: 200000\ntools:",
            lambda p: p.daily_token_budget == 200000,
        ),
        (
            "timezone Asia/Tokyo",
            "tools:",
            "timezone: Asia/Tokyo\ntools:",
            lambda p: p.timezone == "Asia/Tokyo",
        ),
        (
            "proactive.enabled on",
            "  enabled: false\n",
            "  enabled: true\n",
            lambda p: p.extra["proactive"]["enabled"] is True,
        ),
        (
            "proactive.window 17:00-22:00",
            '  window: "18:00-23:00"\n',
            "  window: 17:00-22:00\n",
            lambda p: p.extra["proactive"]["window"] == "17:00-22:00",
        ),
        (
            "proactive.max_per_week 3",
            '  window: "18:00-23:00"\n',
            '  window: "18:00-23:00"\n  max_per_week: 3\n',
            lambda p: p.extra["proactive"]["max_per_week"] == 3,
        ),
        (
            "name Kai the Owl",
            "name: Kai   # what people call it",
            "name: Kai the Owl   # what people call it",
            lambda p: p.name == "Kai the Owl",
        ),
    ],
)
async def test_each_setting_changes_only_its_own_line(
    harness: Harness, command: str, before: str, after: str, check: object
) -> None:
    path = await kai(harness)
    answer = await admin(harness, f"/admin partner set kai {command}")
    assert "is now" in answer, answer
    if before == "tools:":  # a key the file did not have goes at the end of the mapping
        expected = PRESET + after.removesuffix("\ntools:") + "\n"
    else:
        expected = PRESET.replace(before, after)
    assert path.read_text(encoding="utf-8") == expected
    assert callable(check) and check(harness.app.catalog.require("kai").preset)


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("memory_scope everyone", "memory_scope"),
        ("daily_token_budget -5", "daily_token_budget"),
        ("daily_token_budget lots", "daily_token_budget"),
        ("timezone Mars/Olympus", "timezone"),
        ("proactive.window evenings", "proactive.window"),
        ("proactive.enabled maybe", "proactive.enabled"),
        ("proactive.enabeld true", "did you mean 'proactive.enabled'"),
        ("colour blue", "colour"),
    ],
)
async def test_a_bad_setting_is_refused_by_name_and_the_file_is_untouched(
    harness: Harness, command: str, named: str
) -> None:
    path = await kai(harness)
    answer = await admin(harness, f"/admin partner set kai {command}")
    assert named in answer and "is now" not in answer, answer
    assert path.read_text(encoding="utf-8") == PRESET


async def test_a_file_with_windows_line_endings_keeps_them(harness: Harness) -> None:
    path = await kai(harness)
    path.write_bytes(PRESET.replace("\n", "\r\n").encode())
    assert "is now" in await admin(harness, "/admin partner set kai proactive.enabled true")
    expected = PRESET.replace("  enabled: false\n", "  enabled: true\n").replace("\n", "\r\n")
    assert path.read_bytes() == expected.encode()


async def test_setting_a_default_again_removes_the_line(harness: Harness) -> None:
    path = await kai(harness)
    harness.llm.models = [*(harness.llm.models or []), "gpt-4o-mini"]
    answer = await admin(harness, "/admin partner set kai model gpt-4o-mini")
    assert "model is now gpt-4o-mini" in answer
    answer = await admin(harness, "/admin partner set kai model default")
    assert "model is now back to its default" in answer
    assert path.read_text(encoding="utf-8") == PRESET
    assert harness.app.catalog.require("kai").preset.model is None
