"""Importing a large Telegram Desktop export: messages stored per second and the growth of
peak RSS while `companion import` reads and stores it (goals: >= 5,000 msgs/s, <= 100 MB),
then the partner's search p95 over what was imported.

The export is generated (seeded) as Telegram Desktop writes it: one personal chat of
``--messages`` messages between two senders, a tenth of them with a list of text entities,
one in fifty a service message. Each import runs in a process of its own (this file with
``--child``), the tree's code first on its path, calling the command's handler into a new data
directory; its peak RSS (VmHWM, reset just before) is measured against the RSS it had before.

``--against DIR`` imports the same export with another checkout's code too (a ``git worktree``
of main, say), the two alternating for ``--rounds`` rounds in an order that swaps each round;
each figure is the median over rounds with its range, and the ratio to DIR's median. On a
shared machine the rates move with the other load; the ratio, measured in the same minutes,
holds, and so does the rate per second of CPU the import used (its threads' CPU time), which
is what the rate would be on an idle machine.

    .venv/bin/python bench/import.py [--messages 100000] [--queries 200]
    .venv/bin/python bench/import.py --against /tmp/main-tree --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
    from bot.config.model import load_config
    from bot.store.opening import open_store
    from partners.recall import Recall

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


def child(tree: Path, export: Path, queries: int) -> None:
    """One import of ``export`` with the code of ``tree``, into a new data directory; its
    figures as one JSON line on stdout (the command's own line goes to stderr)."""
    sys.path.insert(0, str(tree))
    from bot.cli.history import cmd_import
    from bot.config.model import load_config

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
            check=True, capture_output=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
        )  # fmt: skip
        config = load_config(config_path)
        args = argparse.Namespace(
            partner="example", file=str(export), format=None, as_user="Ana", chat=None
        )
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS from here on
        before = rss_mb("VmRSS")
        began, cpu = time.perf_counter(), time.process_time()
        stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            cmd_import(config, args)
        finally:
            sys.stdout = stdout
        figures = {
            "took": time.perf_counter() - began,
            "cpu": time.process_time() - cpu,
            "growth": rss_mb("VmHWM") - before,
        }
        if queries:
            p50, p95 = asyncio.run(search_p95(config_path, queries, random.Random(28)))
            figures |= {"p50": p50, "p95": p95}
    print(json.dumps(figures))


def run_child(tree: Path, export: Path, queries: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(tree), "--export", str(export),
         "--queries", str(queries)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--export", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child, options.export, options.queries)
        return
    trees = {"this tree": ROOT} | ({"against": options.against} if options.against else {})
    stored = options.messages - options.messages // 50
    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "result.json"
        write_export(export, options.messages, random.Random(28))
        print(f"file: {export.stat().st_size / 1e6:.1f} MB, {stored} messages to store")
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        for round_ in range(options.rounds):
            order = list(trees.items())
            for label, tree in order[::-1] if round_ % 2 else order:
                figures = run_child(tree, export, options.queries)
                figures["rate"] = stored / figures["took"]
                figures["cpu_rate"] = stored / figures["cpu"]
                runs[label].append(figures)
    for label in trees:
        report(label, runs[label], runs.get("against"))


def report(
    label: str, runs: list[dict[str, float]], against: list[dict[str, float]] | None
) -> None:
    def figure(key: str, unit: str, digits: int = 0) -> str:
        values = [run[key] for run in runs if key in run]
        if not values:
            return "-"
        median = statistics.median(values)
        text = f"{median:,.{digits}f}{unit}"
        if len(values) > 1:
            text += f" [{min(values):,.{digits}f}-{max(values):,.{digits}f}]"
        if against is not None and label != "against":
            base = statistics.median(run[key] for run in against if key in run)
            text += f" = {median / base:.2f}x" if base else ""
        return text

    print(f"{label} ({len(runs)} rounds):")
    print(f"  import: {figure('rate', ' msgs/s')} (goal >= 5,000)")
    print(f"  per second of CPU (both threads): {figure('cpu_rate', ' msgs')}")
    print(f"  peak RSS growth: {figure('growth', ' MB', 1)} (goal <= 100 MB)")
    print(f"  search after import: p50 {figure('p50', ' ms', 1)}, p95 {figure('p95', ' ms', 1)}")


if __name__ == "__main__":
    main()
