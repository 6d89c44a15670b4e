"""How often a channel calls into the gateway for one inbound message, counted on the real SDKs
against the fakes: a channel hands over one event and asks nothing back per message or per
send (what it must know comes to it as a view, pushed when it changes)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from adapters.base import Receiver
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    GROUP,
    TelegramGateways,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

RECEIVER_METHODS = [name for name in dir(Receiver) if not name.startswith("_")]


def count_calls(gateway: object) -> Counter[str]:
    """Count every call a channel makes through the :class:`Receiver` protocol from now on."""
    calls: Counter[str] = Counter()

    def counting(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return method(*args, **kwargs)

        return call

    for name in RECEIVER_METHODS:
        setattr(gateway, name, counting(name, getattr(gateway, name)))
    return calls


async def confirmed(fake: FakeTelegram, update: dict[str, Any]) -> None:
    """Telegram was told the update is handled (the gateway recorded it first)."""
    update_id = int(update["update_id"])
    await fake.wait_until(
        lambda: all(int(u["update_id"]) > update_id for u in fake.pending_updates),
        timeout=10,
        description="the update to be confirmed",
    )


async def test_a_telegram_dm_calls_the_gateway_once(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    calls = count_calls(gateway.app.gateway)
    fake_llm.script(Reply(text="Hello!"))
    update = fake.send_user_message(chat_id=501, text="hi there")
    await fake.wait_for_sent(chat_id=501)
    await confirmed(fake, update)
    assert sum(calls.values()) == 1, calls


async def test_a_telegram_group_message_and_its_reply_call_the_gateway_once(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start()
    for partner in ("example", "sol"):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    calls = count_calls(gateway.app.gateway)
    fake_llm.script(Reply(text="Sunny."))
    update = fake.send_user_message(chat_id=GROUP, chat_type="supergroup", text="Sol, hi")
    [reply] = await fake.wait_for_sent(chat_id=GROUP)
    assert reply.text == "<b>Sol</b>: Sunny."
    await confirmed(fake, update)
    assert sum(calls.values()) == 1, calls
