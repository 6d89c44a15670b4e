"""A channel that only counts what it is asked to send, for benchmarks of the core."""

from __future__ import annotations

from typing import Any

from bot.events import ChatRef, Outbound


class CountingChannel:
    platform = "bench"
    connected = True

    def __init__(self) -> None:
        self.sent = 0

    async def start(self, receiver: Any) -> None:
        del receiver

    async def stop(self) -> None:
        pass

    def split(self, text: str) -> list[str]:
        return [text]

    async def send(self, message: Outbound) -> str:
        del message
        self.sent += 1
        return "x"

    async def send_file(self, chat: ChatRef, filename: str, data: bytes, caption: str) -> str:
        del chat, filename, data, caption
        return "x"

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        del chat, partner_id

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> None:
        del chat, reply_to, partner_id
