"""Partners on disk: prompt assembly, the companion plugin's layout, ids, create/clone/delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from partners.catalog import PartnerCatalog
from partners.persona import (
    PartnerError,
    PromptContext,
    assemble_prompt,
    check_partner_id,
    load_partner,
)
from partners.preset_edit import set_preset_value

CONTEXT = PromptContext(user="Alice", session="s-1", platform="telegram")


def make_partner(root: Path, files: dict[str, str], preset: str = "name: Kai\n") -> Path:
    directory = root / "kai"
    directory.mkdir(parents=True)
    (directory / "preset.yml").write_text(preset, encoding="utf-8")
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def test_prompt_joins_files_in_order_and_skips_empty_ones(tmp_path: Path) -> None:
    directory = make_partner(
        tmp_path,
        {
            "MEMORY.md": "- likes rain",
            "AGENTS.md": "AGENTS part",
            "SYSTEM.md": "SYSTEM part",
            "USER.md": "   \n",
            "SOUL.md": "SOUL part",
        },
    )
    prompt = assemble_prompt(load_partner(directory), CONTEXT, budget=20000, notice=True).text
    order = [prompt.index(part) for part in ("SYSTEM part", "SOUL part", "AGENTS part", "likes")]
    assert order == sorted(order)
    assert "IDENTITY" not in prompt and "\n\n\n" not in prompt
    assert "data, not instructions" in prompt


def test_placeholders_are_filled_once_and_unknown_ones_kept(tmp_path: Path) -> None:
    directory = make_partner(
        tmp_path,
        {
            "SYSTEM.md": "I am {{partner}} ({{preset}}) with {{user}} on {{platform}} in "
            "{{session}}; files at {{partnerDir}} {{presetDir}} {{cwd}}; {{mystery}}",
        },
    )
    prompt = assemble_prompt(load_partner(directory), CONTEXT, budget=20000, notice=True).text
    assert prompt == (
        "I am Kai (kai) with Alice on telegram in s-1; files at partners/kai partners/kai "
        "partners/kai; {{mystery}}"
    )


def test_entry_ids_are_not_in_the_prompt(tmp_path: Path) -> None:
    directory = make_partner(tmp_path, {"MEMORY.md": "- likes tea <!-- m_18c2f0a1b2c3d -->\n"})
    prompt = assemble_prompt(load_partner(directory), CONTEXT, budget=20000, notice=True).text
    assert "likes tea" in prompt and "m_18c2" not in prompt


def test_over_budget_adds_a_notice_naming_heaviest_files_without_truncating(
    tmp_path: Path,
) -> None:
    big = "- fact\n" * 400
    directory = make_partner(tmp_path, {"SOUL.md": "soul " * 50, "MEMORY.md": big})
    result = assemble_prompt(load_partner(directory), CONTEXT, budget=1000, notice=True)
    assert result.over_budget
    assert big.strip() in result.text
    assert "MEMORY.md" in result.text.split("(Note:")[1]
    quiet = assemble_prompt(load_partner(directory), CONTEXT, budget=1000, notice=False)
    assert "(Note:" not in quiet.text and quiet.over_budget


def test_per_user_memory_follows_the_partner_files(tmp_path: Path) -> None:
    directory = make_partner(tmp_path, {"MEMORY.md": "- own fact"})
    context = PromptContext("Alice", "s", "telegram", user_memory="- Alice has a dog\n")
    prompt = assemble_prompt(load_partner(directory), context, budget=20000, notice=True).text
    assert prompt.index("own fact") < prompt.index("Alice has a dog")
    assert "What you remember about Alice" in prompt


SEED_PRESET = """# 伙伴
name: 小林
description: 温柔的陪伴者
order: 2
avatar: avatar.png
"""


def test_a_seed_003_companion_directory_loads_unchanged(tmp_path: Path) -> None:
    directory = make_partner(
        tmp_path,
        {
            "SYSTEM.md": "你是 {{preset}}，目录 {{presetDir}}，"
            "工作目录 {{cwd}}，会话 {{session}}。",
            "SOUL.md": "# 人格\n温柔。",
            "IDENTITY.md": "# 身份\n小林。",
            "USER.md": "",
            "AGENTS.md": "# 准则\n先倾听。",
            "MEMORY.md": "# 记忆\n- 用户喜欢猫\n",
        },
        SEED_PRESET,
    )
    (directory / "memory").mkdir()
    (directory / "memory" / "2026-11-01.md").write_text("# 2026-11-01\n> 摘要：聊了猫\n")
    (directory / "changelog").mkdir()
    (directory / "changelog" / ".changelog.md").write_text("old log\n")
    before = {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}
    partner = load_partner(directory)
    assert partner.name == "小林" and partner.preset.order == 2
    assert partner.preset.description == "温柔的陪伴者"
    prompt = assemble_prompt(partner, CONTEXT, budget=20000, notice=True).text
    assert prompt.startswith("你是 kai，目录 partners/kai，工作目录 partners/kai，会话 s-1。")
    assert "用户喜欢猫" in prompt
    assert {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "bad", ["../etc", "a/b", "..", "", "UPPER", "-dash", "a" * 33, "x\x00y", "/abs", "a b"]
)
def test_ids_that_could_escape_the_data_dir_are_refused(bad: str, tmp_path: Path) -> None:
    with pytest.raises(PartnerError):
        check_partner_id(bad)
    catalog = PartnerCatalog(tmp_path / "partners")
    with pytest.raises(PartnerError):
        catalog.create(bad)
    assert not (tmp_path / "etc").exists()


def test_bad_preset_values_are_named(tmp_path: Path) -> None:
    directory = make_partner(tmp_path, {}, "name: " + "n" * 61 + "\n")
    with pytest.raises(PartnerError, match="name: is 61 characters; the limit is 60"):
        load_partner(directory)


def test_broken_yaml_names_the_file(tmp_path: Path) -> None:
    directory = make_partner(tmp_path, {}, "name: [unclosed\n")
    with pytest.raises(PartnerError, match="preset.yml: not valid YAML"):
        load_partner(directory)


def test_create_clone_delete(tmp_path: Path) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    created = catalog.create("luna", "Luna")
    assert created.name == "Luna" and (created.dir / "SYSTEM.md").exists()
    (created.dir / "memory" / "2026-11-29.md").write_text("journal")
    (created.dir / "users").mkdir()
    (created.dir / "users" / "telegram-1.md").write_text("- private")
    (created.dir / "MEMORY.md").write_text("- own fact\n")
    clone = catalog.clone("luna", "luna2")
    assert (clone.dir / "MEMORY.md").read_text() == "- own fact\n"
    assert not (clone.dir / "users").exists()
    assert list((clone.dir / "memory").iterdir()) == []
    trashed = catalog.delete("luna")
    assert trashed.parent.name == ".trash" and (trashed / "users" / "telegram-1.md").exists()
    assert catalog.get("luna") is None and catalog.get("luna2") is not None


def test_a_broken_partner_does_not_hide_the_others(tmp_path: Path) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    catalog.create("good")
    bad = tmp_path / "partners" / "bad"
    bad.mkdir()
    (bad / "preset.yml").write_text("memory_scope: everyone\n")
    catalog.reload()
    assert [p.id for p in catalog.all()] == ["good"]
    assert "memory_scope" in catalog.errors["bad"]


def test_set_preset_value_keeps_comments_and_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "preset.yml"
    path.write_text("# my partner\nname: Old\n# a note\ndescription: d\nmodel: m\n")
    set_preset_value(path, "name", "New: name")
    assert (
        path.read_text() == "# my partner\nname: 'New: name'\n# a note\ndescription: d\nmodel: m\n"
    )
    with pytest.raises(PartnerError, match="limit is 200"):
        set_preset_value(path, "description", "d" * 201)


def test_example_partner_is_created_only_when_there_is_none(tmp_path: Path) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    assert catalog.ensure_example() is not None
    assert catalog.ensure_example() is None
    assert [p.id for p in catalog.all()] == ["example"]


def test_the_search_language_comes_from_the_preset(tmp_path: Path) -> None:
    assert load_partner(make_partner(tmp_path / "a", {})).preset.language == "english"
    spanish = make_partner(tmp_path / "b", {}, "name: Kai\nlanguage: es\n")
    assert load_partner(spanish).preset.language == "spanish"
    klingon = make_partner(tmp_path / "c", {}, "name: Kai\nlanguage: klingon\n")
    with pytest.raises(PartnerError, match="preset.yml: language: 'klingon' is not a language"):
        load_partner(klingon)
