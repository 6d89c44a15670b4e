"""What the whole-process tests on PostgreSQL send and check: messages over a few chats (a
quarter of them asking for a three-chunk answer), and whether every one was answered, once, in
its chat's order, with nothing left pending. Shared by the failover tests of several workers
(``test_workers.py``) and the restart test of one (``test_postgres_restart.py``).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import World
from tests.e2e.model import TAG

SEED = int(os.environ.get("E2E_SEED", str(random.randrange(1_000_000))))
CHATS = 8
FIRST_CHAT = 30_000
MESSAGES_PER_ROUND = 4
LONG_SHARE = 0.25
STEP_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.1


@dataclass
class Ledger:
    """What the test sent and what it may expect back."""

    sent: dict[int, list[str]] = field(default_factory=dict)
    """chat -> its tags in the order they were sent."""
    long_tags: set[str] = field(default_factory=set)
    unrecorded: Counter[str] = field(default_factory=Counter)
    """Texts Telegram took that no worker had recorded when one was killed: each may come once
    more (the documented window)."""
    calls_checked: int = 0
    requests_seen: dict[str, int] = field(default_factory=dict)
    """The model's chat requests per tag up to the last kill."""
    cut_requests: Counter[str] = field(default_factory=Counter)
    """Model calls made for messages that were still pending when a worker was killed (a
    living worker's turn counts too: the test cannot tell them apart, which only loosens)."""
    log: list[str] = field(default_factory=list)

    @property
    def tags(self) -> list[str]:
        return [tag for tags in self.sent.values() for tag in tags]

    def seed(self) -> str:
        return f"(seed {SEED}; {'; '.join(self.log[-40:])})"


def send_round(world: World, rng: random.Random, ledger: Ledger) -> list[str]:
    """A few messages over random chats; a quarter ask for a three-chunk answer."""
    tags = []
    for _ in range(MESSAGES_PER_ROUND):
        chat = FIRST_CHAT + rng.randrange(CHATS)
        tag = world.tag()
        if rng.random() < LONG_SHARE:
            ledger.long_tags.add(tag)
            world.send(chat, f"tell me a long story #{tag} long")
        else:
            world.send(chat, f"how was your day #{tag}")
        ledger.sent.setdefault(chat, []).append(tag)
        tags.append(tag)
    return tags


async def settle(world: World, cluster: Cluster, ledger: Ledger) -> None:
    """Every message answered, every long answer whole, nothing left pending."""
    for tag in ledger.tags:
        await world.wait_for_reply(tag, timeout=STEP_TIMEOUT_SECONDS)
    for tag in ledger.long_tags:
        await world.telegram.wait_until(
            lambda tag=tag: set(chunks_of(world, tag)) == {"1", "2", "3"},
            STEP_TIMEOUT_SECONDS,
            f"all chunks of #{tag}",
        )
    await poll(lambda: finished(cluster), "no message left pending")


async def finished(cluster: Cluster) -> bool:
    return await cluster.unfinished() == 0


async def poll(
    condition: Callable[[], Awaitable[bool]], what: str, found: Callable[[], str] = str
) -> None:
    """Wait for a condition on what other processes write (rows, documents): no event to
    wait on, so it is checked every 100 ms until ``STEP_TIMEOUT_SECONDS``; ``found`` says
    what there was instead when it times out."""
    try:
        async with asyncio.timeout(STEP_TIMEOUT_SECONDS):
            while not await condition():  # noqa: ASYNC110 - other processes' rows: no event
                await asyncio.sleep(POLL_SECONDS)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what} (seed {SEED}): {found()}") from None


def chunks_of(world: World, tag: str) -> Counter[str]:
    pattern = re.compile(rf"#{tag}/(\d)")
    return Counter(m.group(1) for text in world.visible() for m in pattern.finditer(text))


def assert_order_kept(world: World, ledger: Ledger) -> None:
    """In each chat, the first reply naming a message comes no earlier than the first reply
    naming the message sent before it (a coalesced reply names both)."""
    for chat, tags in ledger.sent.items():
        replies = world.visible(chat)
        first = [
            next(i for i, text in enumerate(replies) if re.search(rf"#{tag}\b", text))
            for tag in tags
        ]
        assert first == sorted(first), f"chat {chat}: replies out of order {tags} {first}"


def assert_each_shown_once(world: World, ledger: Ledger, allowed_repeats: Counter[str]) -> None:
    """Every reply text users saw came once, plus at most its allowed repeats."""
    shown = Counter(text for text in world.visible() if TAG.search(text))
    for text, copies in shown.items():
        allowed = 1 + allowed_repeats[text]
        assert copies <= allowed, f"{text[:24]!r} shown {copies} times {ledger.seed()}"
