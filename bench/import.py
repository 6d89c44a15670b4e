"""Importing a large Telegram Desktop export: messages stored per second and the growth of
peak RSS while `companion import` reads and stores it (goals: >= 5,000 msgs/s, <= 100 MB),
then the partner's search p95 over what was imported.

The export is generated (seeded) as Telegram Desktop writes it: one personal chat of
``--messages`` messages between two senders, a tenth of them with a list of text entities,
one in fifty a service message. The import runs in this process, as the command's handler, so
its peak RSS (VmHWM, reset just before) is measured against the RSS the process had before.

    .venv/bin/python bench/import.py [--messages 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.cli.history import cmd_import  # noqa: E402
from bot.config.model import load_config  # noqa: E402
from bot.store.opening import open_store  # noqa: E402
from partners.recall import Recall  # noqa: E402

WORDS = [
    "lighthouse",
    "puffin",
    "sourdough",
    "tortoise",
    "garden",
    "tomato",
    "balcony",
    "harbour",
    "train",
    "museum",
    "violin",
    "mountain",
    "river",
    "bicycle",
    "library",
    "coffee",
    "winter",
    "festival",
    "lantern",
    "market",
    "ferry",
    "island",
]


def write_export(path: Path, count: int, rng: random.Random) -> None:
    """A result.json of one chat, written message by message (never held whole)."""
    start = 1_600_000_000
    with path.open("w", encoding="utf-8") as file:
        file.write('{\n "name": "Mira",\n "type": "personal_chat",\n "id": 4815162342,\n')
        file.write(' "messages": [\n')
        for number in range(1, count + 1):
            file.write(",\n" if number > 1 else "")
            file.write(json.dumps(_message(number, start + number * 37, rng), ensure_ascii=False))
        file.write("\n ]\n}\n")


def _message(number: int, when: int, rng: random.Random) -> dict[str, object]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when))
    if number % 50 == 0:
        service = {"actor": "Ana", "actor_id": "user5", "action": "pin_message", "text": ""}
        return {"id": number, "type": "service", "date": stamp, "date_unixtime": str(when),
                **service}  # fmt: skip
    sender = ("Ana", "user5") if number % 2 else ("Mira Bot", "user777")
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20)))
    text: object = words
    if number % 10 == 0:
        text = [words + " ", {"type": "bold", "text": rng.choice(WORDS)}]
    return {"id": number, "type": "message", "date": stamp, "date_unixtime": str(when),
            "from": sender[0], "from_id": sender[1], "text": text, "text_entities": []}  # fmt: skip


def rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


async def search_p95(config_path: Path, queries: int, rng: random.Random) -> tuple[float, float]:
    config = load_config(config_path)
    store = await open_store(config.database)
    recall = Recall.configured(store, None, config.embeddings)
    took = []
    try:
        for _ in range(queries):
            query = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
            began = time.perf_counter()
            await recall.search("example", query, ["user:telegram:5"], 10)
            took.append((time.perf_counter() - began) * 1000)
    finally:
        await store.close()
    return statistics.median(took), statistics.quantiles(took, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    options = parser.parse_args()
    rng = random.Random(28)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        config_path = root / "config.toml"
        config_path.write_text(
            '[llm]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
            f'[storage]\ndata_dir = "{root / "data"}"\n',
            encoding="utf-8",
        )
        subprocess.run(
            [sys.executable, "-m", "bot.cli.main", "--config", str(config_path), "partners",
             "new", "example", "--name", "Mira"],
            check=True, capture_output=True,
        )  # fmt: skip
        export = root / "result.json"
        write_export(export, options.messages, rng)
        config = load_config(config_path)
        args = argparse.Namespace(
            partner="example", file=str(export), format=None, as_user="Ana", chat=None
        )
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS from here on
        before = rss_mb("VmRSS")
        began = time.perf_counter()
        cmd_import(config, args)
        took = time.perf_counter() - began
        growth = rss_mb("VmHWM") - before
        stored = options.messages - options.messages // 50
        print(f"file: {export.stat().st_size / 1e6:.1f} MB, {stored} messages to store")
        print(f"import: {took:.1f} s, {stored / took:,.0f} msgs/s (goal >= 5,000)")
        print(f"peak RSS growth: {growth:.1f} MB (goal <= 100 MB)")
        p50, p95 = asyncio.run(search_p95(config_path, options.queries, rng))
        print(f"search after import: p50 {p50:.1f} ms, p95 {p95:.1f} ms")


if __name__ == "__main__":
    main()
