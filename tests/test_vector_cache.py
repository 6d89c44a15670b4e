"""The in-memory vector cache behind semantic recall: it must choose exactly the vectors the
store's SQL path chooses (the reference) for every asker, and must never return a vector the
store has deleted or replaced since it was read — a forgotten message above all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.services.vectors import nearest, pack, unit
from bot.store import NewMessage, NewVector, Store
from bot.workers.embedder import reindex
from partners.recall import Recall
from partners.vector_cache import VectorCache, VectorFilter
from tests.conftest import StoreBackend
from tests.fakes.fake_llm import FakeLLM
from tests.store_support import execute
from tests.test_recall_embeddings import client, store_with_history

MODEL, OTHER_MODEL, DIM = "m", "other", 8
ALICE, BOB, GROUP = "user:test:42", "user:test:43", "chat:test:g1"
BUDGET_BYTES = 2**20


async def said(
    store: Store,
    audience: str,
    text: str,
    *,
    partner: str = "example",
    speaker: str = "Alice",
    at: float = 1000.0,
    status: str = "done",
    model: str = MODEL,
    vector: np.ndarray | None = None,
) -> int:
    """A message with a vector (a random one unless given: these tests are about which
    vectors count)."""
    message_id = await store.add_message(
        NewMessage(
            audience, "user", text, audience, status=status, partner_id=partner,
            speaker=speaker, created_at=at,
        )
    )  # fmt: skip
    assert message_id is not None
    if vector is None:
        vector = vector_of(message_id)
    await store.save_vectors(model, [NewVector(message_id, text, DIM, pack(vector))])
    return message_id


def vector_of(message_id: int) -> np.ndarray:
    """The vector :func:`said` gave that message."""
    return unit(np.random.default_rng(message_id).standard_normal(DIM))


async def sql_candidates(store: Store, audiences: list[str] | None, **narrow: object) -> list[int]:
    max_scan = int(narrow.pop("max_scan", 1000))  # type: ignore[call-overload]
    rows = await store.vector_candidates(
        "example",
        audiences,
        MODEL,
        DIM,
        max_scan,
        **narrow,  # type: ignore[arg-type]
    )
    return [message_id for message_id, _ in rows]


async def cache_candidates(
    cache: VectorCache, store: Store, audiences: list[str] | None, **narrow: object
) -> list[int]:
    scopes = await store.search_scopes("example", audiences)
    max_scan = int(narrow.pop("max_scan", 1000))  # type: ignore[call-overload]
    found = await cache.candidates(
        "example",
        MODEL,
        DIM,
        VectorFilter(scopes, max_scan, **narrow),  # type: ignore[arg-type]
    )
    assert found is not None
    return found


ASKERS: list[list[str] | None] = [[ALICE], [BOB], [GROUP], [ALICE, GROUP], ["user:nobody"], None]
NARROWINGS: list[dict[str, object]] = [
    {},
    {"since": 1500.0},
    {"until": 1500.0},
    {"since": 1000.0, "until": 2000.0},
    {"speaker": "alice"},
    {"speaker": "BOB"},
    {"speaker": "nobody"},
    {"max_scan": 2},
]


async def test_the_cache_chooses_the_same_vectors_as_the_store(store: Store) -> None:
    await said(store, ALICE, "I adopted a kitten")
    await said(store, ALICE, "my sister moved to Lyon", at=2000.0)
    await said(store, BOB, "I sold my bike", speaker="Bob")
    await said(store, GROUP, "who wants pizza", speaker="Bob", at=3000.0)
    await said(store, GROUP, "me!", at=1500.0)
    await said(store, ALICE, "still waiting for an answer", status="pending")
    await said(store, ALICE, "another partner's", partner="other")
    await said(store, ALICE, "another model's", model=OTHER_MODEL)
    cache = VectorCache(store, BUDGET_BYTES)
    for audiences in ASKERS:
        for narrow in NARROWINGS:
            expected = await sql_candidates(store, audiences, **dict(narrow))
            got = await cache_candidates(cache, store, audiences, **dict(narrow))
            assert got == expected, (audiences, narrow)
    assert await sql_candidates(store, [ALICE])  # the comparison is not of empty lists


async def nearest_both_ways(
    cache: VectorCache,
    store: Store,
    audiences: list[str] | None,
    query: np.ndarray,
    **narrow: object,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The 5 nearest through the cache, and through the store's SQL (the reference)."""
    max_scan = int(narrow.pop("max_scan", 1000))  # type: ignore[call-overload]
    rows = await store.vector_candidates(
        "example", audiences, MODEL, DIM, max_scan, **narrow  # type: ignore[arg-type]
    )  # fmt: skip
    scopes = await store.search_scopes("example", audiences)
    only = VectorFilter(scopes, max_scan, **narrow)  # type: ignore[arg-type]
    found = await cache.nearest("example", MODEL, query, 5, only)
    assert found is not None
    return found, nearest(query, rows, 5)


async def test_a_search_through_the_cache_ranks_only_what_the_asker_may_see(
    store: Store,
) -> None:
    """The cache scores a whole stretch of its matrix in place when the asker's rows are dense
    in it (other people's rows in between are scored too) and copies the rows out when they
    are few and spread out; either way only the asker's rows may be ranked. Each query is the
    very vector of one message, which comes first for whoever may see it and not at all for
    anyone else."""
    notes = [await said(store, ALICE, f"note {i}", at=1000.0 + i) for i in range(12)]
    others = [
        await said(store, BOB, "Bob's secret", speaker="Bob"),  # among Alice's rows
        await said(store, GROUP, "in the group", speaker="Bob", at=1005.0),
        await said(store, ALICE, "still waiting", status="pending"),
        await said(store, ALICE, "another partner's", partner="other"),
        await said(store, ALICE, "another model's", model=OTHER_MODEL),
    ]
    notes += [await said(store, ALICE, f"note {i}", at=2000.0 + i) for i in range(12, 24)]
    others += [  # a second row each, far from the first: Bob's and the group's are copied out
        await said(store, BOB, "Bob again", speaker="Bob", at=3000.0),
        await said(store, GROUP, "the group again", at=3000.0),
    ]
    cache = VectorCache(store, BUDGET_BYTES)
    for audiences in ASKERS:
        for narrow in NARROWINGS:
            for message_id in [*others, notes[3], notes[-1]]:
                query = vector_of(message_id)
                got, expected = await nearest_both_ways(
                    cache, store, audiences, query, **dict(narrow)
                )
                assert [m for m, _ in got] == [m for m, _ in expected], (audiences, narrow)
                assert [s for _, s in got] == pytest.approx([s for _, s in expected])
    for message_id in others:
        got, _ = await nearest_both_ways(cache, store, [ALICE], vector_of(message_id))
        assert got and {m for m, _ in got} <= set(notes)
    for audiences, seen in (([BOB], others[0]), ([GROUP], others[1]), ([ALICE], notes[3])):
        got, _ = await nearest_both_ways(cache, store, audiences, vector_of(seen))
        assert got[0] == (seen, pytest.approx(1.0))  # what the queries would find if ranked


async def test_equal_vectors_rank_the_later_message_first_on_both_paths(store: Store) -> None:
    """The same text said again has the same vector: the newer message comes first (as in
    the lexical ranking), in the cache as in SQL, also where only some of them fit."""
    same = vector_of(0)
    first = await said(store, ALICE, "good night", vector=same)
    await said(store, ALICE, "something else")
    second = await said(store, ALICE, "good night", vector=same)
    third = await said(store, ALICE, "good night", vector=same)
    await said(store, ALICE, "and more")
    cache = VectorCache(store, BUDGET_BYTES)
    got, expected = await nearest_both_ways(cache, store, [ALICE], same)
    assert [m for m, _ in got][:3] == [m for m, _ in expected][:3] == [third, second, first]
    for top in (1, 2):
        scopes = await store.search_scopes("example", [ALICE])
        few = await cache.nearest("example", MODEL, same, top, VectorFilter(scopes, 1000))
        assert [m for m, _ in few or []] == [third, second][:top]


async def test_the_cache_follows_every_change_the_store_makes(store: Store) -> None:
    cache = VectorCache(store, BUDGET_BYTES)
    kitten = await said(store, ALICE, "I adopted a kitten")
    pending = await said(store, ALICE, "still waiting", status="pending")
    bob = await said(store, BOB, "I sold my bike", speaker="Bob")
    lyon = await said(store, ALICE, "my sister moved to Lyon")
    assert await cache_candidates(cache, store, [ALICE]) == [lyon, kitten]  # warm
    newer = await said(store, ALICE, "we went hiking")  # appended
    await store.set_status(pending, "done")  # answered: now it counts
    await store.delete_messages([kitten])  # forgotten
    await store.set_message_text(bob, "I sold my car")  # its vector is outdated
    lyon_vector = pack(unit([1.0] * DIM))  # a new model's vector replaces the old one
    await store.save_vectors(
        OTHER_MODEL, [NewVector(lyon, "my sister moved to Lyon", DIM, lyon_vector)]
    )
    for audiences in ([ALICE], [BOB], None):
        expected = await sql_candidates(store, audiences)
        assert await cache_candidates(cache, store, audiences) == expected
    assert await cache_candidates(cache, store, [ALICE]) == [newer, pending]
    assert await cache_candidates(cache, store, [BOB]) == []


async def test_a_message_forgotten_while_the_cache_is_warm_is_never_found(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.embedding_synonyms = {"kitten": "cat"}
    store, kitten = await store_with_history(tmp_path)
    embeddings = client(fake_llm, MODEL)
    cache = VectorCache(store, BUDGET_BYTES)
    recall = Recall(store, embeddings, cache=cache)
    try:
        assert await reindex(store, embeddings, "example", 10) == 2
        found = await recall.search("example", "my cat", [ALICE], 5)
        assert [hit.message_id for hit in found] == [kitten]  # through its vector only
        dim = (await embeddings.embed_query("cat")).size
        only = VectorFilter(await store.search_scopes("example", [ALICE]), 100)
        assert kitten in (await cache.candidates("example", MODEL, dim, only) or [])  # warm

        await store.delete_messages([kitten])

        assert await recall.search("example", "my cat", [ALICE], 5) == []
        assert kitten not in (await cache.candidates("example", MODEL, dim, only) or [])
    finally:
        await embeddings.close()
        await store.close()


async def test_a_partner_too_large_for_the_budget_is_searched_through_the_store(
    store: Store,
) -> None:
    await said(store, ALICE, "I adopted a kitten")
    cache = VectorCache(store, budget_bytes=16)
    assert await cache.candidates("example", MODEL, DIM, VectorFilter(["x"], 10)) is None


async def test_a_cache_the_pruned_log_no_longer_covers_reads_everything_again(
    store: Store, store_backend: StoreBackend
) -> None:
    cache = VectorCache(store, BUDGET_BYTES)
    kitten = await said(store, ALICE, "I adopted a kitten")
    lyon = await said(store, ALICE, "my sister moved to Lyon")
    assert await cache_candidates(cache, store, [ALICE]) == [lyon, kitten]  # warm
    seen = await store.vector_log_position()
    await store.delete_messages([kitten])  # logged after what the cache has seen...
    newer = await said(store, ALICE, "we went hiking")
    # ...and pruned away, as save_vectors prunes the oldest entries of a long log
    await execute(store_backend, "DELETE FROM vector_log WHERE seq <= ?", seen + 1)
    assert await cache_candidates(cache, store, [ALICE]) == [newer, lyon]
