"""Telegram throughput: the full gateway path against a bare python-telegram-bot echo bot.

Both run on the real python-telegram-bot against the fake Bot API (tests/fakes), in one
process and one event loop, with the same driver: CHATS users each send MESSAGES_PER_CHAT
messages, one at a time, each after the answer to the previous one arrived (a conversation,
so the gateway has nothing to coalesce). The gateway path is all of it: store, dedup, access,
dispatcher, prompt, a zero-latency fake LLM, the typing indicator and delivery records. The
echo bot is an Application with one MessageHandler that sends the text back.

    .venv/bin/python bench/telegram_throughput.py [--chats 50] [--messages 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telegram import Update  # noqa: E402
from telegram.ext import Application, ContextTypes, MessageHandler, filters  # noqa: E402

from adapters.telegram_channel import TelegramChannel  # noqa: E402
from bench.llm_process import llm_process  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from tests.fakes.fake_telegram import TOKEN, FakeTelegram  # noqa: E402

FIRST_CHAT = 100_001
ECHO_CONCURRENCY = 16  # TESTING.md: 4-16 beat PTB's 256 on a small machine


class Replies:
    """Counts successful sendMessage calls per chat, reading the fake's call log once."""

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake
        self.count: Counter[int] = Counter()
        self._seen = 0
        self._open: list[int] = []
        self._changed = asyncio.Condition()

    async def watch(self) -> None:
        calls = self.fake.calls
        while True:
            await self.fake.wait_until(
                lambda: len(calls) > self._seen or any(calls[i].status for i in self._open),
                timeout=3600,
            )
            self._open.extend(range(self._seen, len(calls)))
            self._seen = len(calls)
            still_open = []
            for index in self._open:
                call = calls[index]
                if call.status is None:
                    still_open.append(index)
                elif call.ok and call.method == "sendMessage":
                    self.count[int(call.params["chat_id"])] += 1
            self._open = still_open
            async with self._changed:
                self._changed.notify_all()

    async def wait(self, chat_id: int, count: int) -> None:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.count[chat_id] >= count), timeout=60
            )


async def drive(fake: FakeTelegram, chats: int, per_chat: int) -> float:
    """Every chat talks in turn-taking; returns the seconds from first message to last reply."""
    replies = Replies(fake)
    watcher = asyncio.create_task(replies.watch())

    async def conversation(chat_id: int) -> None:
        for number in range(per_chat):
            fake.send_user_message(chat_id=chat_id, text=f"message {number}", first_name="U")
            await replies.wait(chat_id, number + 1)

    started = time.perf_counter()
    await asyncio.gather(*(conversation(FIRST_CHAT + i) for i in range(chats)))
    elapsed = time.perf_counter() - started
    watcher.cancel()
    return elapsed


async def run_gateway(chats: int, per_chat: int) -> float:
    async with FakeTelegram() as fake, llm_process() as llm_url:
        with tempfile.TemporaryDirectory() as data_dir:
            config = Config.model_validate(
                {
                    "llm": {"base_url": llm_url, "api_key": "x", "max_retries": 0},
                    "storage": {"data_dir": data_dir},
                    "owner": {"timezone": "UTC"},
                    "access": {"dm_policy": "open"},
                    "memory": {"auto_memory": False},
                    "telegram": {"token": TOKEN, "base_url": fake.base_url},
                }
            )
            channel = TelegramChannel(config.telegram)
            app = await build_app(config, {"telegram": channel})
            await app.start()
            try:
                return await drive(fake, chats, per_chat)
            finally:
                await app.stop()


async def run_echo_bot(chats: int, per_chat: int) -> float:
    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None and update.effective_chat is not None
        await context.bot.send_message(update.effective_chat.id, update.effective_message.text)

    async with FakeTelegram() as fake:
        application = (
            Application.builder()
            .token(TOKEN)
            .base_url(fake.base_url)
            .concurrent_updates(ECHO_CONCURRENCY)
            .build()
        )
        application.add_handler(MessageHandler(filters.TEXT, echo))
        await application.initialize()
        await application.start()
        assert application.updater is not None
        await application.updater.start_polling(poll_interval=0, timeout=10)
        try:
            return await drive(fake, chats, per_chat)
        finally:
            await application.updater.stop()
            await application.stop()
            await application.shutdown()


async def measure(
    name: str, run: Callable[[int, int], Awaitable[float]], chats: int, per_chat: int
) -> float:
    seconds = await run(chats, per_chat)
    rate = chats * per_chat / seconds
    print(f"{name:<28} {chats * per_chat} messages in {seconds:6.2f} s = {rate:7.1f} msg/s")
    return rate


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    per_chat = max(1, args.messages // args.chats)
    logging.basicConfig(level=logging.ERROR)
    gateway = await measure("gateway (full path)", run_gateway, args.chats, per_chat)
    echo = await measure("bare PTB echo bot", run_echo_bot, args.chats, per_chat)
    print(f"gateway / echo bot: {gateway / echo:.0%} (goal >= 50%)")


if __name__ == "__main__":
    asyncio.run(main())
