"""Discord throughput: the full gateway path against a bare discord.py echo bot.

Both run on the real discord.py against the fake Discord REST API and gateway (tests/fakes),
in one process and one event loop, with the same driver: CHANNELS server channels (each bound
to the example partner) carry MESSAGES / CHANNELS messages that mention the bot, one at a time
per channel, each after the answer to the previous one arrived (a conversation, so the gateway
has nothing to coalesce). The gateway path is all of it: ordering per chat, access, store and
dedup, dispatcher, prompt and tools, a zero-latency fake LLM, the typing indicator, the
persona webhook send and delivery records. The echo bot is a ``discord.Client`` whose
``on_message`` sends the text back to the channel.

    .venv/bin/python bench/discord_throughput.py [--channels 50] [--messages 2000]
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

import discord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.discord_channel import DiscordChannel  # noqa: E402
from bench.llm_process import llm_process  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from tests.fakes.fake_discord import BOT_TOKEN, FakeDiscord, point_discord_at  # noqa: E402

GUILD = 10
FIRST_CHANNEL = 1_000
USER = 5
BOT_ID = 900  # FakeDiscord's bot


def world(fake: FakeDiscord, channels: int) -> list[int]:
    fake.add_guild(GUILD, "Bench")
    fake.add_user(USER, "driver")
    ids = [FIRST_CHANNEL + n for n in range(channels)]
    for channel_id in ids:
        fake.add_text_channel(GUILD, channel_id, f"c{channel_id}")
    return ids


class Replies:
    """Counts the bot's messages per channel (channel posts and webhook posts alike), reading
    the fake's REST log once."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.count: Counter[int] = Counter()
        self._seen = 0
        self._changed = asyncio.Condition()

    async def watch(self) -> None:
        calls = self.fake.rest_calls
        while True:
            await self.fake.wait_until(lambda: len(calls) > self._seen, timeout=3600)
            for call in calls[self._seen :]:
                is_post = call.ok and call.method == "POST"
                if is_post and (call.path.endswith("/messages") or "/webhooks/" in call.path):
                    self.count[int(call.response["channel_id"])] += 1
            self._seen = len(calls)
            async with self._changed:
                self._changed.notify_all()

    async def wait(self, channel_id: int, count: int) -> None:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.count[channel_id] >= count), timeout=60
            )


async def drive(fake: FakeDiscord, channels: list[int], per_channel: int) -> float:
    """Every channel talks in turn-taking; returns the seconds from first message to last reply."""
    replies = Replies(fake)
    watcher = asyncio.create_task(replies.watch())

    async def conversation(channel_id: int) -> None:
        for number in range(per_channel):
            await fake.message_create(
                channel_id=channel_id, author_id=USER,
                content=f"<@{BOT_ID}> message {number}", mentions=[BOT_ID],
            )  # fmt: skip
            await replies.wait(channel_id, number + 1)

    started = time.perf_counter()
    await asyncio.gather(*(conversation(channel_id) for channel_id in channels))
    elapsed = time.perf_counter() - started
    watcher.cancel()
    return elapsed


async def run_gateway(channel_count: int, per_channel: int) -> float:
    async with FakeDiscord() as fake, llm_process() as llm_url:
        channels = world(fake, channel_count)
        restore = point_discord_at(fake)
        with tempfile.TemporaryDirectory() as data_dir:
            config = Config.model_validate(
                {
                    "llm": {"base_url": llm_url, "api_key": "x", "max_retries": 0},
                    "storage": {"data_dir": data_dir},
                    "owner": {"timezone": "UTC"},
                    "access": {"dm_policy": "open"},
                    "memory": {"auto_memory": False},
                    "discord": {
                        "token": BOT_TOKEN,
                        "api_base": fake.api_base,
                        "gateway_url": fake.gateway_url,
                    },
                    "bindings": [
                        {"platform": "discord", "chat_id": c, "partner": "example"}
                        for c in channels
                    ],
                }
            )
            channel = DiscordChannel(config.discord, guild_ready_timeout=0.05)
            app = await build_app(config, {"discord": channel})
            await app.start()
            try:
                return await drive(fake, channels, per_channel)
            finally:
                await app.stop()
                restore()


class EchoBot(discord.Client):
    async def on_message(self, message: discord.Message) -> None:
        if self.user is not None and message.author.id != self.user.id:
            await message.channel.send(message.content)


async def run_echo_bot(channel_count: int, per_channel: int) -> float:
    async with FakeDiscord() as fake:
        channels = world(fake, channel_count)
        restore = point_discord_at(fake)
        intents = discord.Intents.default()
        intents.message_content = True
        bot = EchoBot(intents=intents, guild_ready_timeout=0.05)
        await bot.login(BOT_TOKEN)
        connection = asyncio.create_task(bot.connect())
        await bot.wait_until_ready()
        try:
            return await drive(fake, channels, per_channel)
        finally:
            await bot.close()
            await asyncio.gather(connection, return_exceptions=True)
            restore()


async def measure(
    name: str, run: Callable[[int, int], Awaitable[float]], channels: int, per_channel: int
) -> float:
    seconds = await run(channels, per_channel)
    total = channels * per_channel
    rate = total / seconds
    print(f"{name:<28} {total} messages in {seconds:6.2f} s = {rate:7.1f} msg/s", flush=True)
    return rate


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    per_channel = max(1, args.messages // args.channels)
    logging.basicConfig(level=logging.ERROR)
    gateway = await measure("gateway (full path)", run_gateway, args.channels, per_channel)
    echo = await measure("bare discord.py echo bot", run_echo_bot, args.channels, per_channel)
    print(f"gateway / echo bot: {gateway / echo:.0%} (goal >= 50%)")


if __name__ == "__main__":
    asyncio.run(main())
