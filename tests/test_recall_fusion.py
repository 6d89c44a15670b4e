"""How lexical and semantic rankings are fused: a message matching the words asked is never
pushed out of the first results by vectors that disagree, CJK searches get the CJK weight,
and a query leaves out the speakers' own names when it asks about more than them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.services import EmbeddingsConfig, LLMConfig
from bot.services.embeddings import EmbeddingsClient
from bot.store import NewMessage, SearchHit, Store
from bot.store.opening import open_store
from bot.workers.embedder import Embedder
from partners import recall
from partners.recall import Recall, dense_weight, fuse, without_names
from tests.fakes.fake_llm import EMBEDDING_DIMENSIONS, FakeLLM

AUDIENCE = "user:test:42"
EXACT = "meet me at the zebra crossing by the school"


def axis(index: int) -> list[float]:
    vector = [0.0] * EMBEDDING_DIMENSIONS
    vector[index] = 1.0
    return vector


@pytest.mark.parametrize("weight", [recall.DENSE_WEIGHT, recall.CJK_DENSE_WEIGHT, 1.0])
def test_the_lexical_first_hit_stays_in_the_top_ten_whatever_the_vectors_say(
    weight: float,
) -> None:
    lexical = list(range(1, 51))  # 1 matches the words asked best
    # the vectors' strongest disagreement: the lexical runners-up first, 1 nowhere
    dense = list(range(2, 52))
    assert fuse(lexical, dense, weight).index(1) < 10
    dense_only = list(range(100, 150))
    assert fuse(lexical, dense_only, weight)[0] == 1


async def said(store: Store, *texts: str, speaker: str = "") -> list[int]:
    ids = []
    for text in texts:
        message = NewMessage(
            "test:42", "user", text, AUDIENCE, partner_id="example", speaker=speaker
        )
        message_id = await store.add_message(message)
        assert message_id is not None
        ids.append(message_id)
    return ids


async def test_an_exact_match_is_not_outvoted_by_vectors_that_disagree(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Through the store, the embedder and the real openai client: twenty messages that
    share one word with the query and that the vectors find closest, forty the vectors alone
    find, and the one message holding the whole query, whose vector is far from it."""
    store = await open_store(tmp_path / "gateway.db")
    near = [f"a zebra at the zoo, visit {n}" for n in range(20)]
    others = [f"nothing alike, note {n}" for n in range(40)]
    [exact] = await said(store, EXACT)
    await said(store, *near, *others)
    fake_llm.embedding_answers = {text: axis(0) for text in [*near, *others, "zebra crossing"]}
    fake_llm.embedding_answers[EXACT] = axis(1)
    config = EmbeddingsConfig(base_url=fake_llm.base_url, model="fake", query_timeout=5)
    client = EmbeddingsClient(config, LLMConfig(base_url=fake_llm.base_url))
    try:
        while await Embedder(store, client, 50).run_once():
            pass
        lexical = await Recall(store).search("example", "zebra crossing", [AUDIENCE], 10)
        assert lexical[0].message_id == exact
        hits = await Recall(store, client).search("example", "zebra crossing", [AUDIENCE], 10)
        assert exact in [hit.message_id for hit in hits]
        assert any(hit.text in others for hit in hits)  # the vectors did have their say
    finally:
        await client.close()
        await store.close()


def hit(text: str) -> SearchHit:
    return SearchHit(1, "", "user", text, 0.0, None)


def test_a_cjk_search_or_history_gets_the_cjk_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall, "CJK_DENSE_WEIGHT", 0.25)
    monkeypatch.setattr(recall, "DENSE_WEIGHT", 0.5)
    assert dense_weight("你还记得我之前说去哪座山看红叶了吗？", []) == 0.25
    assert dense_weight("Kyoto", [hit("我上周末去爬了香山 Kyoto"), hit("秋天的香山最美了")]) == 0.25
    assert dense_weight("which mountain did I climb?", [hit("I climbed Xiangshan")]) == 0.5
    assert dense_weight("which mountain did I climb?", []) == 0.5


async def test_a_partner_search_in_chinese_is_fused_with_the_cjk_weight(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights: list[float] = []
    real_fuse = recall.fuse

    def spy(lexical: list[int], dense: list[int], weight: float) -> list[int]:
        weights.append(weight)
        return real_fuse(lexical, dense, weight)

    monkeypatch.setattr(recall, "fuse", spy)
    monkeypatch.setattr(recall, "CJK_DENSE_WEIGHT", 0.25)
    store = await open_store(tmp_path / "gateway.db")
    await said(store, "我上周末去爬了香山", "I climbed a hill")
    config = EmbeddingsConfig(base_url=fake_llm.base_url, model="fake", query_timeout=5)
    client = EmbeddingsClient(config, LLMConfig(base_url=fake_llm.base_url))
    try:
        await Embedder(store, client, 10).run_once()
        searcher = Recall(store, client)
        await searcher.search("example", "你去哪座山了", [AUDIENCE], 5)
        await searcher.search("example", "which hill did I climb", [AUDIENCE], 5)
    finally:
        await client.close()
        await store.close()
    assert weights == [0.25, recall.DENSE_WEIGHT]


def test_names_are_taken_out_as_whole_words_in_any_case() -> None:
    assert without_names("What did tim's cat eat?", ["Tim"]) == "What did  's cat eat?"
    assert without_names("Timothy's cat", ["Tim"]) == "Timothy's cat"
    assert without_names("小林去哪了", ["小林"]) == " 去哪了"


async def test_a_speakers_name_in_the_query_does_not_outrank_what_was_asked(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "gateway.db")
    try:
        [greeting] = await said(store, "Happy birthday Tim!", speaker="Sol")
        await said(store, "what a day", "lovely weather", speaker="Sol")
        [adopted] = await said(store, "I adopted a kitten", speaker="Tim")
        [papers] = await said(store, "adoption papers are boring", speaker="Tim")
        searcher = Recall(store)
        found = await searcher.search("example", "What did Tim adopt?", [AUDIENCE], 5)
        ids = [hit.message_id for hit in found]
        assert ids[:2] == [papers, adopted] and greeting not in ids  # newer first on ties
        # a query of a name alone still finds it
        only = await searcher.search("example", "Tim", [AUDIENCE], 5)
        assert only[0].message_id == greeting
    finally:
        await store.close()
