"""The sending Bot's connection pool survives sends cancelled at any moment of their start
(adapters/telegram_send_request.py): a turn's typing indicator is cancelled when its reply
is ready, a stream's edits when it ends. Real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio

from telegram import Bot, Message

from adapters.telegram_bots import POOL_TIMEOUT_SECONDS, SEND_POOL_SIZE, build_bot
from adapters.telegram_send_request import SendRequest
from bot.config.platforms import TelegramConfig
from tests.fakes.fake_telegram import TOKEN, FakeTelegram

POOL = 4
"""A small pool, so that a few connections left taken would take all of it."""
SWEEP_TURNS = 30
"""How many turns of the event loop a cancel is moved across: a send connects, writes and
reads within its first dozen turns or so on 127.0.0.1."""
CHAT = 7


async def test_sends_cancelled_at_every_moment_of_their_start_leave_the_pool_usable() -> None:
    async with FakeTelegram() as fake:
        fake.send_user_message(chat_id=CHAT, text="hi", first_name="U")
        request = SendRequest(POOL, pool_timeout=5.0)
        bot = Bot(TOKEN, request=request, base_url=fake.base_url)
        await bot.initialize()
        try:
            for sweep in range(2):
                for turns in range(SWEEP_TURNS):
                    send = asyncio.create_task(bot.send_message(CHAT, f"cut {sweep}.{turns}"))
                    for _ in range(turns):
                        await asyncio.sleep(0)
                    send.cancel()
                    await asyncio.gather(send, return_exceptions=True)
            # as many sends at once as the pool has connections: each needs one of its own
            sends = [bot.send_message(CHAT, f"after {n}") for n in range(POOL)]
            sent = await asyncio.gather(*sends)
            assert all(isinstance(message, Message) for message in sent)
        finally:
            await request.shutdown()


def test_the_channel_sends_through_that_request() -> None:
    config = TelegramConfig.model_validate({"token": TOKEN})
    request = build_bot(config, TOKEN).request
    assert isinstance(request, SendRequest)
    assert request._client_kwargs["limits"].max_connections == SEND_POOL_SIZE
    assert request._client_kwargs["timeout"].pool == POOL_TIMEOUT_SECONDS
