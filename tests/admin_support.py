"""Helpers for the /admin tests: send an owner command and read what came back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.events import Attachment, Outbound
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply


async def admin(harness: Harness, text: str, **kwargs: Any) -> str:
    """Send ``text`` (a whole command line) as the owner; the answers, joined."""
    return "\n".join(m.text for m in await admin_messages(harness, text, **kwargs))


async def admin_messages(
    harness: Harness,
    text: str,
    attachment: tuple[str, bytes] | Attachment | None = None,
    **kwargs: Any,
) -> list[Outbound]:
    """``attachment``: a document sent with the command, as (file name, content) that the
    channel then holds, or as a reference to one."""
    before = len(harness.channel.sent)
    if isinstance(attachment, tuple):
        attachment = harness.channel.hold(*attachment)
    if attachment is not None:
        kwargs["attachment"] = attachment
    await harness.send(dm(OWNER_ID, text, name="Owner", **kwargs))
    await harness.settle()
    return harness.channel.sent[before:]


async def say(
    harness: Harness, user: int | str, text: str, answer: str, name: str = "Alice"
) -> str:
    """One turn of a user with their partner; returns the reply text."""
    harness.llm.script(Reply(text=answer))
    before = len(harness.channel.sent)
    await harness.send(dm(user, text, name=name))
    await harness.settle()
    return "\n".join(m.text for m in harness.channel.sent[before:])


def partner_dir(harness: Harness, partner_id: str = "example") -> Path:
    return harness.app.catalog.require(partner_id).dir


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes, to prove nothing changed."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
