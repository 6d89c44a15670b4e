"""A long stretch of traffic against the real process: every message answered once, memory
flat, no task or file leak, no error in the log.

Chats talk to three partners: direct messages with the default partner or one picked with
``/partner``, and groups bound to a partner in the config (every group message mentions the
bot). Each chat sends its next message once the answer to the last one arrived, all chats at
once. ``make test`` runs SOAK_MESSAGES=500 over SOAK_CHATS=50; ``make soak`` runs 20,000 over
500 and prints the figures (RSS at the start and the end, threads, open files, messages/s)
that bench/README.md quotes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tests.e2e.conftest import BOT_USERNAME, World, assert_no_secrets
from tests.e2e.gateway_process import GatewayProcess
from tests.fakes.fake_telegram import Call, FakeTelegram

MESSAGES = int(os.environ.get("SOAK_MESSAGES", "500"))
CHATS = int(os.environ.get("SOAK_CHATS", "50"))
PARTNERS = (("example", "Mira"), ("sol", "Sol"), ("kai", "Kai"))
GROUP_EVERY = 10
"""Every tenth chat is a group."""
WARM_UP_SHARE = 0.1
"""RSS "at the start" is read once this share of the messages is answered (imports, caches
and the first sessions are in place by then)."""
RSS_GROWTH_ALLOWED = 1.5
OPEN_FILES_GROWTH_ALLOWED = 150
"""The HTTP connection pools (up to 32 for Telegram sends, the LLM client's keep-alive pool)
grow with how many chats are answered at once; a leak grows with every message."""
REPLY_TIMEOUT_SECONDS = 120.0
FORGET_LLM_REQUESTS_EVERY = 200


@dataclass
class ReplyCounter:
    """Successful sendMessage calls per chat, counted incrementally (a soak has tens of
    thousands of calls: rescanning them for every waiter would dominate the run)."""

    fake: FakeTelegram
    counts: Counter[int] = field(default_factory=Counter)
    texts: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    changed: dict[int, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))
    _cursor: int = 0
    _open: list[Call] = field(default_factory=list)

    def scan(self) -> bool:
        calls = self.fake.calls
        self._open += [c for c in calls[self._cursor :] if c.method == "sendMessage"]
        self._cursor = len(calls)
        still_open = []
        for call in self._open:
            if call.status is None:
                still_open.append(call)
            elif call.ok:
                chat = int(call.chat_id)
                self.counts[chat] += 1
                self.texts[chat].append(call.text or "")
                self.changed[chat].set()
        self._open = still_open
        return False

    async def run(self) -> None:
        await self.fake.wait_until(self.scan, timeout=24 * 3600)

    async def wait(self, chat: int, count: int) -> None:
        async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
            while self.counts[chat] < count:
                event = self.changed[chat]
                event.clear()
                await event.wait()


@dataclass
class Figures:
    rss_idle_kib: int = 0
    rss_start_kib: int = 0
    rss_end_kib: int = 0
    peak_kib: int = 0
    rss_series_mib: list[float] = field(default_factory=list)
    """RSS after each tenth of the messages: a leak climbs, a warm cache levels off."""
    threads: tuple[int, int] = (0, 0)
    threads_series: list[int] = field(default_factory=list)
    """Threads after each tenth: a worker pool starts threads when concurrency asks for them,
    up to its bound, and keeps them; a leak keeps adding threads past every bound."""
    open_files: tuple[int, int] = (0, 0)
    seconds: float = 0.0

    def read_start(self, gateway: GatewayProcess) -> None:
        self.rss_start_kib = gateway.rss_kib()
        self.threads = (gateway.status("Threads"), 0)
        self.open_files = (gateway.open_files(), 0)

    def read_end(self, gateway: GatewayProcess) -> None:
        self.rss_end_kib = gateway.rss_kib()
        self.peak_kib = gateway.status("VmHWM")
        self.threads = (self.threads[0], gateway.status("Threads"))
        self.open_files = (self.open_files[0], gateway.open_files())

    def summary(self) -> str:
        rate = MESSAGES / self.seconds if self.seconds else 0.0
        return (
            f"soak: {MESSAGES} messages over {CHATS} chats in {self.seconds:.1f} s "
            f"({rate:.1f} messages/s); RSS {self.rss_idle_kib / 1024:.1f} MiB idle, "
            f"{self.rss_start_kib / 1024:.1f} MiB after warm-up, "
            f"{self.rss_end_kib / 1024:.1f} MiB at the end (peak {self.peak_kib / 1024:.1f} MiB); "
            f"threads {self.threads[0]} -> {self.threads[1]} "
            f"(by tenths: {' '.join(str(n) for n in self.threads_series)}); "
            f"open files {self.open_files[0]} -> {self.open_files[1]}; RSS by tenths (MiB): "
            + " ".join(f"{mib:.1f}" for mib in self.rss_series_mib)
        )


def chat_plan(world: World) -> dict[int, str | None]:
    """chat id -> the partner it talks with (None: a DM with the default partner)."""
    plan: dict[int, str | None] = {}
    for number in range(CHATS):
        partner = PARTNERS[number % len(PARTNERS)][0]
        if number % GROUP_EVERY == GROUP_EVERY - 1:
            plan[-100_000 - number] = partner
        else:
            plan[50_000 + number] = None if partner == "example" else partner
    del world
    return plan


async def test_soak_every_message_answered_once_with_flat_memory(world: World) -> None:
    for partner_id, name in PARTNERS[1:]:
        world.add_partner(partner_id, name)
    plan = chat_plan(world)
    bindings = [
        {"platform": "telegram", "chat_id": str(chat), "partner": partner}
        for chat, partner in plan.items()
        if chat < 0 and partner is not None
    ]
    config = world.config(partners={"default": "example"}, bindings=bindings)
    gateway = await world.start(config)
    counter = ReplyCounter(world.telegram)
    watcher = asyncio.create_task(counter.run())
    figures = Figures(rss_idle_kib=gateway.rss_kib())
    budget = {chat: MESSAGES // CHATS + (1 if i < MESSAGES % CHATS else 0)
              for i, chat in enumerate(plan)}  # fmt: skip
    answered = 0
    warm_up = max(1, int(MESSAGES * WARM_UP_SHARE))
    tenth = max(1, MESSAGES // 10)
    expected: dict[str, int] = {}

    async def one_chat(chat: int) -> None:
        nonlocal answered
        replies = 0
        partner = plan[chat]
        if chat > 0 and partner is not None:
            world.send(chat, f"/partner {partner}")
            replies += 1
            await counter.wait(chat, replies)
        for _ in range(budget[chat]):
            tag = world.tag()
            expected[tag] = chat
            if chat < 0:
                text = f"@{BOT_USERNAME} how was your day? #{tag}"
                world.send(chat, text, chat_type="supergroup", chat_title=f"Group {chat}",
                           user_id=7000 + (-chat % 1000),
                           entities=world.telegram.mention_entity(text))  # fmt: skip
            else:
                world.send(chat, f"how was your day? #{tag}")
            replies += 1
            await counter.wait(chat, replies)
            answered += 1
            if answered == warm_up:
                figures.read_start(gateway)
            if answered % tenth == 0:
                figures.rss_series_mib.append(gateway.rss_kib() / 1024)
                figures.threads_series.append(gateway.status("Threads"))
            if answered % FORGET_LLM_REQUESTS_EVERY == 0:
                world.llm.requests.clear()  # the fake keeps every request otherwise
                world.llm.request_headers.clear()

    started = time.monotonic()
    await asyncio.gather(*(one_chat(chat) for chat in plan))
    figures.seconds = time.monotonic() - started
    figures.read_end(gateway)
    watcher.cancel()
    print(figures.summary())

    for tag, chat in expected.items():
        naming = [text for text in counter.texts[chat] if text.endswith(f"#{tag}")]
        assert len(naming) == 1, f"#{tag} answered {len(naming)} times"
    for chat, partner in plan.items():
        if partner is not None and chat > 0:
            assert "talking with" in counter.texts[chat][0]
    sessions = world.query("SELECT partner_id, COUNT(*) FROM sessions GROUP BY partner_id")
    assert {partner for partner, _ in sessions} == {p for p, _ in PARTNERS}
    assert gateway.errors() == []
    assert_no_secrets(gateway.output)
    assert figures.rss_end_kib <= figures.rss_start_kib * RSS_GROWTH_ALLOWED, figures.summary()
    assert figures.open_files[1] <= figures.open_files[0] + OPEN_FILES_GROWTH_ALLOWED, (
        figures.summary()
    )
    # asyncio's default executor (file reads off the loop) starts a thread whenever none is
    # idle, up to min(32, cores + 4), and keeps it; a thread per turn would pass that bound
    # many times over in this run
    pool_bound = min(32, (os.cpu_count() or 1) + 4)
    assert figures.threads[1] <= figures.threads[0] + pool_bound, figures.summary()
