"""A person's yes before an MCP tool marked ``confirm`` runs (docs/tools.md).

The turn asks in the chat, showing the call and its arguments literally, with Yes and No
buttons where the channel has them (Telegram, Discord) and "Answer yes or no." for everyone.
A button sends ``yes #<id>`` or ``no #<id>`` as if its presser had typed it; the person's next
plain ``yes`` or ``no`` in that chat answers too. The gateway hands either here before
anything else (``bot/gateway/inbound.py``), and it goes no further: it is not a message to the
partner.

**The question lives in the store**, not in this process: with several workers on one
database, the press may reach a worker other than the one whose turn asked (Telegram's updates
come to the leader, a Discord interaction to the worker holding its shard). Whichever worker
it reaches records the answer in the question's row; the asking turn polls that row, first
after :data:`POLL_FIRST_SECONDS`, the wait doubling up to :data:`POLL_MAX_SECONDS`, and is woken
at once when the answer was recorded in its own process. Polling rather than PostgreSQL's
LISTEN/NOTIFY: it is the same on both backends, holds no connection per waiting turn, and a
dropped connection cannot lose a wake-up; a person answers in seconds, and one row read every
second or two per open question costs the database nothing.

**Only the person asked can answer**: a press by anyone else is refused with a short note
(on Discord only the presser sees it), and so is a press on a question answered already or
past its time. No answer within ``mcp.confirm_seconds`` is not a yes: the tool is not run and
the model reads that the person did not confirm. A second question while one is open for the
same person in the same chat is not asked (the call is not made either).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from adapters.base import Channel, DeliveryError
from bot.events import ChatRef, Choice, Inbound, Outbound
from bot.store import ConfirmationRow, Store

logger = logging.getLogger(__name__)

CONFIRM_SECONDS = 120.0
YES, NO = "yes", "no"
PRESSED = re.compile(r"^(yes|no) #([0-9a-f]{10})$")
"""What a button sends: the answer and the question's id."""
POLL_FIRST_SECONDS = 0.25
POLL_MAX_SECONDS = 2.0
KEEP_SECONDS = 86_400.0
"""How long a closed question is kept, so that a late press is told what became of it."""

ASKED_BY_OTHERS = "Only the person this question was asked of can answer it."
ANSWERED = "This question has been answered already."
TIMED_OUT = "This question timed out: the tool was not used."
GONE = "This question is no longer open."


class Outcome(Enum):
    """How a question ended."""

    YES = "yes"
    NO = "no"
    TIMED_OUT = "timed out"
    NOT_ASKED = "not asked"
    """No channel, the question could not be delivered, or another one is open."""


@dataclass(frozen=True)
class Taken:
    """A message that was an answer (or a press on a question): it goes no further.
    ``notice``: what to tell the one who sent it, if anything."""

    notice: str | None = None


class Confirmations:
    """Asks questions and takes their answers, through the store (see the module)."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        store: Store,
        wait_seconds: float = CONFIRM_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.channels = channels
        self.store = store
        self.wait_seconds = wait_seconds
        self.clock = clock
        """Wall-clock time: a question's expiry is read by every worker."""
        self._woken: dict[str, asyncio.Event] = {}
        """The questions this process waits on, by id: set when it records their answer."""

    async def ask(self, chat: ChatRef, user_key: str, question: str) -> Outcome:
        """Ask ``question`` in ``chat`` and wait for that person's answer."""
        channel = self.channels.get(chat.platform)
        if channel is None:
            return Outcome.NOT_ASKED
        now = self.clock()
        row = ConfirmationRow(
            secrets.token_hex(5), chat.key, user_key, now, now + self.wait_seconds
        )
        if not await self.store.add_confirmation(row, now - KEEP_SECONDS):
            return Outcome.NOT_ASKED
        woken = self._woken[row.id] = asyncio.Event()
        try:
            await self._send(channel, chat, row.id, question)
            return await self._answer(row, woken)
        except DeliveryError as exc:
            logger.warning("could not ask for a confirmation in %s: %s", chat.key, exc)
            await self.store.answer_confirmation(row.id, False, self.clock())  # closed
            return Outcome.NOT_ASKED
        finally:
            self._woken.pop(row.id, None)

    async def _send(self, channel: Channel, chat: ChatRef, question_id: str, question: str) -> None:
        """The question in as many chunks as the platform needs, the buttons on the last."""
        choices = (Choice("Yes", f"{YES} #{question_id}"), Choice("No", f"{NO} #{question_id}"))
        chunks = channel.split(f"{question}\n\nAnswer yes or no.")
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            await channel.send(Outbound(chat, chunk, choices=choices if last else ()))

    async def _answer(self, row: ConfirmationRow, woken: asyncio.Event) -> Outcome:
        """Poll the question's row until it is answered or expires (see the module)."""
        delay = POLL_FIRST_SECONDS
        while True:
            found = await self.store.confirmation(row.id)
            if found is not None and found.answer is not None:
                return Outcome.YES if found.answer else Outcome.NO
            left = row.expires_at - self.clock()
            if found is None or left <= 0:
                return Outcome.TIMED_OUT
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), min(delay, left))
            delay = min(delay * 2, POLL_MAX_SECONDS)

    async def take(self, inbound: Inbound) -> bool:
        """Whether ``inbound`` answers a question (then it goes no further); a note to its
        sender goes back in the chat where one is due (a press on another's question)."""
        chat = inbound.chat
        taken = await self.answer(chat.key, inbound.sender.key, inbound.text)
        if taken is None:
            return False
        channel = self.channels.get(chat.platform)
        if taken.notice is not None and channel is not None:
            try:
                await channel.send(Outbound(chat, taken.notice, inbound.message_id))
            except DeliveryError as exc:
                logger.warning("note on a question not delivered in %s: %s", chat.key, exc)
        return True

    async def answer(self, chat_key: str, user_key: str, text: str) -> Taken | None:
        """Take ``text`` from this person in this chat as the answer to a question: a press
        of a question's button, or a plain ``yes``/``no`` while one is open for them. None:
        it is no answer, and goes on as an ordinary message."""
        now = self.clock()
        pressed = PRESSED.match(text.strip())
        if pressed is not None:
            word, question_id = pressed.groups()
            row = await self.store.confirmation(question_id)
            if row is None or row.chat_key != chat_key:
                return Taken(GONE)
            if row.user_key != user_key:
                return Taken(ASKED_BY_OTHERS)
        else:
            word = text.strip().lower().rstrip(".!")
            if word not in (YES, NO):
                return None
            row = await self.store.open_confirmation(chat_key, user_key, now)
            if row is None:
                return None
        if not await self.store.answer_confirmation(row.id, word == YES, now):
            return Taken(await self._closed(row.id))
        if (woken := self._woken.get(row.id)) is not None:
            woken.set()
        return Taken()

    async def _closed(self, question_id: str) -> str:
        """Why a question takes no answer any more."""
        row = await self.store.confirmation(question_id)
        if row is None:
            return GONE
        return ANSWERED if row.answer is not None else TIMED_OUT
