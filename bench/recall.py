"""Recall of partner_search on conversations with known answers: R@1, R@5 and R@10 per language.

The data (``bench/data/recall_*.json``, written for this project) are short exchanges between a
user and a partner, each placed inside a session of everyday chatter, with a later question
about it in other words. English questions paraphrase what was said, often about the turn
*after* a question ("What are your pets' names?" -> "Luna and Oliver!"), with inflected words
(joined/join, adopted/adopt); the Chinese, Japanese and Korean questions are whole lines of
dialogue that share only some characters with the answer. A question counts as recalled at k
when the answer message is among the first k results of ``Store.search`` over that user's
history, exactly as the partner would search it.

    .venv/bin/python bench/recall.py              # the table
    .venv/bin/python bench/recall.py --misses en  # also list the English questions missed at 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.store import NewMessage, Store  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SEED = 12
KS = (1, 5, 10)
FILLER_PER_FACT = {"en": 20, "zh": 24, "ja": 24, "ko": 24}
"""Chatter messages per fact: ~3,000 English and ~2,000 Chinese messages in all."""
SESSION_MESSAGES = (20, 60)
DAY_SECONDS = 86_400.0
SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Part:
    """One language: its facts and the user and partner who talk in it."""

    language: str
    user: str
    partner: str
    facts: list[dict[str, Any]]


@dataclass(frozen=True)
class Question:
    text: str
    answer_id: int


def load_parts() -> list[Part]:
    parts = []
    for language in ("en", "zh"):
        data = json.loads((DATA / f"recall_{language}.json").read_text(encoding="utf-8"))
        parts.append(Part(language, data["user"], data["partner"], data["facts"]))
    more = json.loads((DATA / "recall_ja_ko.json").read_text(encoding="utf-8"))
    for language, data in more["parts"].items():
        parts.append(Part(language, data["user"], data["partner"], data["facts"]))
    return parts


class Chatter:
    """Filler lines with their slots filled at random (seeded)."""

    def __init__(self, spec: dict[str, Any], rng: random.Random) -> None:
        self.lines: list[str] = spec["lines"]
        self.slots: dict[str, list[str]] = spec["slots"]
        self.rng = rng

    def line(self) -> str:
        template = self.rng.choice(self.lines)
        return SLOT.sub(lambda m: self.rng.choice(self.slots[m.group(1)]), template)


def sessions_of(part: Part, chatter: Chatter, rng: random.Random) -> list[list[tuple]]:
    """The part's messages as sessions: lists of (role, text, fact index or None, turn)."""
    stream: list[tuple] = []
    facts = list(range(len(part.facts)))
    rng.shuffle(facts)
    for index in facts:
        for _ in range(rng.randint(0, 2 * FILLER_PER_FACT[part.language])):
            stream.append((rng.choice("up"), chatter.line(), None, None))
        for turn, (role, text) in enumerate(part.facts[index]["t"]):
            stream.append((role, text, index, turn))
    sessions = []
    while stream:
        size = rng.randint(*SESSION_MESSAGES)
        sessions.append(stream[:size])
        stream = stream[size:]
    return sessions


async def store_part(store: Store, part: Part, rng: random.Random, filler: dict) -> list[Question]:
    """Write the part as a user's imported history; the questions with their answers' ids."""
    partner_id = f"recall-{part.language}"
    user_key = f"bench:{part.language}"
    audience = f"user:{user_key}"
    chatter = Chatter(filler[part.language], rng)
    answers: dict[int, int] = {}
    clock = time.time() - 400 * DAY_SECONDS
    for number, session in enumerate(sessions_of(part, chatter, rng)):
        chat_key = f"bench:{partner_id}:{number}"
        row = await store.create_session(
            partner_id=partner_id,
            chat_key=chat_key,
            user_key=user_key,
            audience=audience,
            system_prompt="",
            kind="import",
            title=session[0][1][:60],
        )
        messages = []
        for role, text, _, _ in session:
            clock += rng.uniform(20, 600)
            messages.append(
                NewMessage(
                    chat_key=chat_key,
                    role="user" if role == "u" else "assistant",
                    text=text,
                    audience=audience,
                    session_id=row.id,
                    partner_id=partner_id,
                    user_key=user_key if role == "u" else None,
                    speaker=part.user if role == "u" else part.partner,
                    created_at=clock,
                )
            )
        ids = await store.add_messages(messages)
        for (_, _, fact, turn), message_id in zip(session, ids, strict=True):
            if fact is not None and turn == part.facts[fact]["a"]:
                assert message_id is not None
                answers[fact] = message_id
        clock += rng.uniform(0.5, 5) * DAY_SECONDS
    return [Question(fact["q"], answers[i]) for i, fact in enumerate(part.facts)]


async def evaluate(
    store: Store, part: Part, questions: list[Question]
) -> tuple[dict[int, float], int, list[str]]:
    """R@k for every k, how many questions found nothing, and the questions missed at 10."""
    partner_id = f"recall-{part.language}"
    audience = f"user:bench:{part.language}"
    found = {k: 0 for k in KS}
    empty = 0
    missed = []
    for question in questions:
        hits = await store.search(partner_id, question.text, [audience], max(KS))
        ranked = [hit.message_id for hit in hits]
        empty += not ranked
        for k in KS:
            found[k] += question.answer_id in ranked[:k]
        if question.answer_id not in ranked:
            missed.append(question.text)
    return {k: found[k] / len(questions) for k in KS}, empty, missed


async def main(show_misses: str | None) -> None:
    rng = random.Random(SEED)
    filler = json.loads((DATA / "recall_filler.json").read_text(encoding="utf-8"))
    parts = load_parts()
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(Path(tmp) / "recall.db")
        try:
            stored = [(part, await store_part(store, part, rng, filler)) for part in parts]
            row = await store._one("SELECT COUNT(*) FROM messages")  # the bench's own count
            print(f"{row[0] if row else 0} messages stored")
            print(f"{'language':<9} {'queries':>7} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'empty':>6}")
            for part, questions in stored:
                recall, empty, missed = await evaluate(store, part, questions)
                print(
                    f"{part.language:<9} {len(questions):>7} {recall[1]:>6.2f} {recall[5]:>6.2f}"
                    f" {recall[10]:>6.2f} {empty:>6}"
                )
                if show_misses == part.language:
                    print("\n".join(f"    missed: {text}" for text in missed))
        finally:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--misses", metavar="LANGUAGE", help="list the questions missed at 10")
    args = parser.parse_args()
    asyncio.run(main(args.misses))
