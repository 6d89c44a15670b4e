"""Lorebook matching per turn: a 10,000-entry book, a 20-message scan depth (goal: p95 ≤ 2 ms),
and the prompt bytes the fired entries add per turn at the default token budget.

The book is generated (seeded): each entry has one to three keys — English words, two-word
names, and Chinese/Japanese terms for a share of them — and a 200-500 character text; 5% of
the entries are selective, three constant. Each turn scans the newest 20 of a rolling
conversation of 60-300 character messages that mention a few keys (and words that are not
keys). The figure is the whole :meth:`Lorebook.fire` call: folding, the automaton pass,
selective logic, budget and rendering.

A second figure is the worst case a card can build: entries whose keys overlap ("w",
"w w", … up to 45 words) and whose texts are those words again, with recursive scanning on.
Every entry's text then holds every key, dozens of times at each place; the figure is one
turn's :meth:`Lorebook.fire` (the best of three) for 100, 1,000 and 5,000 such entries.

    .venv/bin/python bench/lore.py [--entries 10000] [--turns 2000] [--overlapping 100,1000,5000]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partners.lore import DEFAULT_BUDGET, Lorebook  # noqa: E402

SCAN_DEPTH = 20
CJK_WORDS = ["東京", "灯台", "港町", "魔法", "騎士団", "図書館", "月光", "深海", "森の精", "旅人"]
FILLER = [
    "we",
    "walked",
    "along",
    "the",
    "harbour",
    "and",
    "talked",
    "about",
    "the",
    "weather",
    "and",
    "the",
    "old",
    "days",
    "while",
    "the",
    "gulls",
    "were",
    "loud",
    "and",
    "the",
    "tea",
    "went",
    "cold",
    "in",
    "our",
    "cups",
]


def word(rng: random.Random) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) for _ in range(rng.randint(4, 9)))


def make_book(entries: int, rng: random.Random) -> tuple[dict[str, object], list[str]]:
    keys_used: list[str] = []
    book_entries = []
    for index in range(entries):
        keys = []
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            if roll < 0.15:
                key = rng.choice(CJK_WORDS) + str(index % 97)
            elif roll < 0.35:
                key = f"{word(rng).title()} {word(rng).title()}"
            else:
                key = word(rng)
            keys.append(key)
        keys_used += keys
        entry: dict[str, object] = {
            "keys": keys,
            "content": " ".join(rng.choice(FILLER) for _ in range(rng.randint(40, 100))),
            "insertion_order": rng.randint(0, 200),
            "constant": index < 3,
        }
        if rng.random() < 0.05:
            entry["selective"] = True
            entry["secondary_keys"] = [rng.choice(FILLER)]
        book_entries.append(entry)
    return {"scan_depth": SCAN_DEPTH, "entries": book_entries}, keys_used


def message(rng: random.Random, keys: list[str]) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(12, 55))]
    for _ in range(rng.randint(0, 2)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(keys))
    return " ".join(words)


OVERLAP_WORDS = 45
"""Keys of 1 to 45 one-letter words: the longest is 89 characters, within a key's limit."""
OVERLAP_TEXT_WORDS = 200


def overlapping_book(entries: int) -> dict[str, object]:
    """Keys that are each other's suffixes, in texts made of them, scanned recursively."""
    text = " ".join(["w"] * OVERLAP_TEXT_WORDS)
    return {
        "recursive_scanning": True,
        "entries": [
            {"keys": [" ".join(["w"] * (index % OVERLAP_WORDS + 1))], "content": f"{index} {text}"}
            for index in range(entries)
        ],
    }


def overlapping(sizes: list[int]) -> None:
    for size in sizes:
        book = Lorebook(overlapping_book(size))
        best = math.inf
        for _ in range(3):
            start = time.process_time()
            fired = book.fire(["w"])
            best = min(best, time.process_time() - start)
        print(
            f"overlapping keys, recursive: {size:>5} entries, one turn {best * 1000:9.1f} ms CPU "
            f"({len(fired.entries)} entries fired)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--overlapping", default="100,1000,5000", help="entry counts, or none")
    args = parser.parse_args()
    rng = random.Random(15)
    raw, keys = make_book(args.entries, rng)
    started = time.perf_counter()
    book = Lorebook(raw)
    built = time.perf_counter() - started
    conversation = [message(rng, keys) for _ in range(SCAN_DEPTH)]
    timings, added, fired = [], [], []
    for _ in range(args.turns):
        conversation = [*conversation[1:], message(rng, keys)]
        start = time.perf_counter()
        result = book.fire(conversation, rng.random)
        timings.append(time.perf_counter() - start)
        added.append(len(result.text.encode("utf-8")))
        fired.append(len(result.entries))
    timings.sort()
    p50 = timings[len(timings) // 2] * 1000
    p95 = timings[int(len(timings) * 0.95)] * 1000
    print(f"entries {args.entries}, scan depth {SCAN_DEPTH}, turns {args.turns}")
    print(f"book load (parse + automaton): {built * 1000:.0f} ms")
    print(f"matching per turn: p50 {p50:.3f} ms, p95 {p95:.3f} ms (goal p95 <= 2 ms)")
    print(
        f"prompt bytes added per turn at the default budget ({DEFAULT_BUDGET} tokens): "
        f"median {statistics.median(added):.0f}, max {max(added)}; "
        f"entries fired: median {statistics.median(fired):.0f}, max {max(fired)}"
    )
    if args.overlapping != "none":
        overlapping([int(size) for size in args.overlapping.split(",")])


if __name__ == "__main__":
    main()
