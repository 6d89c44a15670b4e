"""The console's conversation with a character card: its greeting opens the conversation
(``companion chat ID``) and follows ``/new``, and ``{{user}}`` is the owner's name there
(``owner.name``, else the login name)."""

from __future__ import annotations

from pathlib import Path

from partners.cards import plan_import, write_import
from tests import card_fixtures as cards
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_cli import companion, write_config

PARTNER = "Ŝirin 🌙"


def with_card_partner(tmp_path: Path, llm: FakeLLM, extra: str = "") -> Path:
    config = write_config(tmp_path, llm.base_url, extra)
    root = tmp_path / "data" / "partners"
    root.mkdir(parents=True)
    write_import(plan_import(cards.as_json(cards.v2()), "c.json", "sirin", root), root)
    return config


async def test_chat_with_a_card_partner_opens_with_its_greeting_to_the_owner_by_name(
    tmp_path: Path,
) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(text="Nice to meet you."))
        config = with_card_partner(tmp_path, llm, 'name = "Alice"\n')
        code, out, err = await companion(config, "chat", "sirin", stdin="hi\n")
    assert code == 0, err
    greeting = f"{PARTNER}: *looks up from the easel* Oh, hello Alice! I'm {PARTNER}."
    assert out.splitlines()[0] == greeting
    messages = llm.requests[0]["messages"]
    # the card's depth prompt (depth 4, system) comes before the greeting, as in SillyTavern
    assert messages[1] == {"role": "system", "content": "x"}
    assert messages[2]["role"] == "assistant" and "hello Alice!" in messages[2]["content"]
    assert "Alice visits" in messages[0]["content"]  # the card's scenario names the owner
    assert "you visits" not in messages[0]["content"]


async def test_without_owner_name_the_console_user_is_the_login_name(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        config = with_card_partner(tmp_path, llm)
        code, out, err = await companion(
            config, "chat", "sirin", extra_env={"LOGNAME": "ana", "USER": "ana"}
        )
    assert code == 0, err
    assert "Oh, hello ana!" in out


async def test_new_in_the_console_starts_a_conversation_that_the_next_greeting_opens(
    tmp_path: Path,
) -> None:
    async with FakeLLM() as llm:
        config = with_card_partner(tmp_path, llm, 'name = "Alice"\n')
        code, out, err = await companion(config, "chat", "sirin", stdin="/new\n/new\n")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{PARTNER}: *looks up from the easel*")
    assert lines[1].startswith("gateway: Started a new conversation")
    assert lines[2] == f"{PARTNER}: Welcome back, Alice."
    assert lines[3].startswith("gateway: Started a new conversation")
    assert lines[4] == f"{PARTNER}: *waves* Hi!"
    assert "already a new conversation" not in out
