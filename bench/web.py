"""The owner's web page: how long its heaviest pages take, and what it costs the chat path.

1. Render time (p50/p95 over --renders requests, measured from a client on 127.0.0.1, so an
   upper bound of the server's time) of the memory page of a partner with 5,000 entries and
   the journal calendar of a partner with a journal every day of a year, each against the
   same page of a partner with nothing, in the same run; and the memory page with a hand
   edit before every view (its parsed entries are then never reused).
2. Chat throughput of the whole Telegram path (bench/telegram_throughput.py's setup: the real
   python-telegram-bot against the fake Bot API, the fake LLM in its own process) with the
   web page off, and with it on and the memory page reloaded every second.

    .venv/bin/python bench/web.py [--renders 200] [--chats 50] [--messages 1000] [--rounds 6]

On a machine shared with other work a single pair says little (one pair measured 0.74x, the
median of three 1.32x): the figure is the median of the per-pair ratios, with their spread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp  # noqa: E402

from adapters.telegram_channel import TelegramChannel  # noqa: E402
from bench.llm_process import llm_process  # noqa: E402
from bench.telegram_throughput import drive  # noqa: E402
from bot.app import App, build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from partners.memory_format import new_entry_id  # noqa: E402
from tests.fakes.fake_telegram import TOKEN, FakeTelegram  # noqa: E402

ENTRIES = 5000
YEAR = 2026
RELOAD_SECONDS = 1.0


def config(data_dir: str, llm_url: str, **sections: dict) -> Config:
    raw: dict = {
        "llm": {"base_url": llm_url, "api_key": "x", "max_retries": 0},
        "storage": {"data_dir": data_dir},
        "owner": {"timezone": "UTC"},
        "access": {"dm_policy": "open"},
        "memory": {"auto_memory": False},
    }
    raw.update(sections)
    return Config.model_validate(raw)


def fill(app: App) -> None:
    """'full': 5,000 memory entries and a journal for every day of a year; 'empty': none."""
    app.catalog.create("full", "Full")
    app.catalog.create("empty", "Empty")
    full = app.catalog.require("full").dir
    lines = [f"- Fact number {n} about the person, with a few words more <!-- {new_entry_id()} -->"
             for n in range(ENTRIES)]  # fmt: skip
    (full / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    journal = full / "memory"
    journal.mkdir(exist_ok=True)
    day = date(YEAR, 1, 1)
    while day.year == YEAR:
        text = f"# {day}\n> Day: a quiet day\n\n## 20:00 · DM <!-- chat:t:1 -->\n> Summary: tea\n"
        (journal / f"{day}.md").write_text(text, encoding="utf-8")
        day += timedelta(days=1)
    app.catalog.reload()


def hand_edit(memory: Path) -> Callable[[int], None]:
    """Before each view, change one entry by hand, so every view parses the file again."""

    def edit(number: int) -> None:
        text = memory.read_text(encoding="utf-8")
        memory.write_text(text.replace("Fact number", f"Fact n{number % 10}", 1), encoding="utf-8")

    return edit


@contextlib.asynccontextmanager
async def owner_client(app: App) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    assert app.web is not None
    link = await app.web.login_link()
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        async with session.post(link) as response:
            assert response.status == 200, await response.text()
        yield session, link.split("/login/", 1)[0]


async def timings(
    session: aiohttp.ClientSession,
    url: str,
    count: int,
    before_each: Callable[[int], None] | None = None,
) -> list[float]:
    seconds = []
    for number in range(count):
        if before_each is not None:
            before_each(number)
        started = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
            assert response.status == 200
        seconds.append(time.perf_counter() - started)
    return seconds


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18]


async def render_times(renders: int) -> None:
    async with llm_process() as llm_url:
        with tempfile.TemporaryDirectory() as data_dir:
            app = await build_app(config(data_dir, llm_url, web={"enabled": True, "port": 0}), {})
            await app.start()
            try:
                await asyncio.to_thread(fill, app)
                memory = app.catalog.require("full").dir / "MEMORY.md"
                async with owner_client(app) as (session, base):
                    for name, path, before_each in (
                        ("memory page", "/memory/{}", None),
                        ("memory, each view after a hand edit", "/memory/{}", hand_edit(memory)),
                        ("journal calendar", f"/journals/{{}}?year={YEAR}", None),
                    ):
                        full = await timings(
                            session, base + path.format("full"), renders, before_each
                        )
                        empty = await timings(session, base + path.format("empty"), renders)
                        print(
                            f"{name}: full p50 {statistics.median(full) * 1000:.1f} ms, "
                            f"p95 {p95(full) * 1000:.1f} ms | empty p50 "
                            f"{statistics.median(empty) * 1000:.1f} ms, p95 "
                            f"{p95(empty) * 1000:.1f} ms | p95 difference "
                            f"{(p95(full) - p95(empty)) * 1000:.1f} ms (goal <= 100 ms)"
                        )
            finally:
                await app.stop()


async def reload_every_second(app: App, stop: asyncio.Event) -> int:
    reloads = 0
    async with owner_client(app) as (session, base):
        while not stop.is_set():
            async with session.get(base + "/memory/example") as response:
                await response.read()
            reloads += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RELOAD_SECONDS)
    return reloads


async def throughput(chats: int, per_chat: int, web: bool) -> float:
    async with FakeTelegram() as fake, llm_process() as llm_url:
        with tempfile.TemporaryDirectory() as data_dir:
            sections: dict = {"telegram": {"token": TOKEN, "base_url": fake.base_url}}
            if web:
                sections["web"] = {"enabled": True, "port": 0}
            app = await build_app(
                config(data_dir, llm_url, **sections),
                {"telegram": TelegramChannel(Config.model_validate(sections).telegram)},
            )
            await app.start()
            stop = asyncio.Event()
            reloader = asyncio.create_task(reload_every_second(app, stop)) if web else None
            try:
                seconds = await drive(fake, chats, per_chat)
            finally:
                stop.set()
                reloads = await reloader if reloader else 0
                await app.stop()
    rate = chats * per_chat / seconds
    label = f"web page on, {reloads} reloads" if web else "web page off"
    print(f"{label:<28} {chats * per_chat} messages in {seconds:6.2f} s = {rate:7.1f} msg/s")
    return rate


async def pair_ratios(chats: int, per_chat: int, pairs: int) -> list[float]:
    """Throughput with the page on / off, one ratio per pair of runs. Pairs alternate their
    order (off-on, on-off, ...), so a steady rise or fall of the machine's other load favours
    neither side; a ratio compares two runs minutes apart, not a run with the whole series."""
    ratios = []
    for number in range(pairs):
        order = (False, True) if number % 2 == 0 else (True, False)
        rates = {web: await throughput(chats, per_chat, web=web) for web in order}
        ratios.append(rates[True] / rates[False])
        print(f"pair {number + 1}: {ratios[-1]:.2f}x")
    return ratios


def spread(ratios: list[float]) -> str:
    """The median of the pair ratios with their range and, from four pairs on, quartiles."""
    text = f"median {statistics.median(ratios):.2f}x of {len(ratios)} pairs, "
    text += f"range {min(ratios):.2f}-{max(ratios):.2f}x"
    if len(ratios) >= 4:
        low, _, high = statistics.quantiles(ratios, n=4)
        text += f", quartiles {low:.2f}-{high:.2f}x"
    return text


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=200)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6, help="off/on pairs (0: renders only)")
    parser.add_argument("--skip-renders", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if not args.skip_renders:
        await render_times(args.renders)
    if args.rounds < 1:
        return
    ratios = await pair_ratios(args.chats, max(1, args.messages // args.chats), args.rounds)
    print(f"with the page reloaded / without: {spread(ratios)} (goal >= 0.95x)")


if __name__ == "__main__":
    asyncio.run(main())
