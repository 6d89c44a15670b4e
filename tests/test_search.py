"""History search: normalisation, CJK, ranking, visibility, limits."""

from __future__ import annotations

import itertools
import time

from bot.store import NewMessage, Store
from bot.store.search_terms import fold, index_terms, match_expression
from tests.conftest import StoreBackend
from tests.store_support import index_vocabulary

CHATS = itertools.count()


async def add(
    store: Store,
    text: str,
    audience: str = "user:a",
    partner: str = "p",
    role: str = "user",
    created_at: float | None = None,
) -> int:
    # each message in a chat of its own: these tests are about a message's own words, not
    # its neighbours' (tests/test_search_context.py)
    message_id = await store.add_message(
        NewMessage(
            f"c{next(CHATS)}", role, text, audience, partner_id=partner, created_at=created_at
        )
    )
    assert message_id is not None
    return message_id


def test_fold_removes_case_and_accents() -> None:
    assert fold("Café CRÈME Ångström") == "cafe creme angstrom"


def test_cjk_runs_become_bigrams() -> None:
    assert index_terms("我在东京") == "我在 在东 东京"
    assert index_terms("Go to 東京!") == "go to 東京"


def test_query_terms_are_or_of_meaningful_words_and_quoted() -> None:
    assert match_expression('What is Tom\'s "NEAR" café') == '"tom" OR "near" OR "cafe"'
    assert match_expression("the a of") is None
    assert match_expression("东京") == '"东京"'


async def test_finds_a_chinese_phrase_inside_a_longer_sentence(store: Store) -> None:
    await add(store, "我下个月要去东京出差，顺便看看朋友")
    await add(store, "今天天气很好")
    hits = await store.search("p", "东京", None, 10)
    assert [h.text for h in hits] == ["我下个月要去东京出差，顺便看看朋友"]
    japanese = await add(store, "来週は京都に行きます")
    hits = await store.search("p", "京都", None, 10)
    assert [h.message_id for h in hits] == [japanese]


async def test_case_and_accent_insensitive(store: Store) -> None:
    await add(store, "We met at the CAFÉ Nero")
    assert len(await store.search("p", "cafe nero", None, 10)) == 1
    assert len(await store.search("p", "Café", None, 10)) == 1


async def test_best_match_first_then_newer(store: Store) -> None:
    now = time.time()
    weak = await add(store, "the garden was nice and the weather too", created_at=now)
    strong = await add(store, "garden roses, garden tulips, garden plans", created_at=now - 100)
    old_tie = await add(store, "roses", created_at=now - 500)
    new_tie = await add(store, "roses", created_at=now - 10)
    hits = await store.search("p", "garden", None, 10)
    assert [h.message_id for h in hits] == [strong, weak]
    ties = await store.search("p", "roses", None, 10)
    assert [h.message_id for h in ties][:2] == [new_tie, old_tie]


async def test_or_of_terms_not_a_phrase(store: Store) -> None:
    await add(store, "my sister lives in Berlin")
    assert len(await store.search("p", "where does my sister live now", None, 10)) == 1


async def test_tool_messages_are_not_searchable(store: Store) -> None:
    await add(store, "partner_search result: tokyo", role="tool")
    assert await store.search("p", "tokyo", None, 10) == []


async def test_visibility_by_audience_and_partner(store: Store) -> None:
    await add(store, "alice's secret lighthouse", audience="user:alice")
    await add(store, "bob's public lighthouse", audience="chat:g")
    await add(store, "other partner lighthouse", partner="q", audience="user:alice")
    alice = await store.search("p", "lighthouse", ["user:alice"], 10)
    assert [h.text for h in alice] == ["alice's secret lighthouse"]
    group = await store.search("p", "lighthouse", ["chat:g"], 10)
    assert [h.text for h in group] == ["bob's public lighthouse"]
    everyone = await store.search("p", "lighthouse", None, 10)
    assert len(everyone) == 2
    assert await store.search("p", "lighthouse", [], 10) == []


async def test_limit_is_respected(store: Store) -> None:
    for i in range(40):
        await add(store, f"note {i} about kites")
    assert len(await store.search("p", "kites", None, 30)) == 30
    assert len(await store.search("p", "kites", None, 5)) == 5


async def test_fts_syntax_in_queries_is_harmless(store: Store) -> None:
    await add(store, 'quotes " and stars * and NEAR(a b)')
    for query in ['"', "*", "NEAR(", "a AND", "col:x", ")(", "^start"]:
        await store.search("p", query, None, 10)
    assert len(await store.search("p", 'stars" OR "', None, 10)) == 1


async def test_a_chinese_line_in_other_words_finds_what_was_said(store: Store) -> None:
    said = await add(store, "我上周末去爬了香山，红叶特别漂亮。")
    await add(store, "今天天气很好，我们去公园散步吧。")
    hits = await store.search("p", "你还记得我之前说去哪座山看红叶了吗？", None, 10)
    assert [h.message_id for h in hits][:1] == [said]


async def test_more_shared_bigrams_rank_higher(store: Store) -> None:
    shares_one = await add(store, "这部电影很好看")
    shares_two = await add(store, "我想去东京看樱花")
    hits = await store.search("p", "东京的樱花好看吗", None, 10)
    assert [h.message_id for h in hits] == [shares_two, shares_one]


async def test_the_exact_phrase_ranks_above_scattered_bigrams(store: Store) -> None:
    # the same length and the same three bigrams; the scattered one is newer, so only the
    # phrase term puts the exact match first
    now = time.time()
    exact = await add(store, "我在东京大学读书", created_at=now - 60)
    scattered = await add(store, "东京京都大学京大", created_at=now)
    hits = await store.search("p", "东京大学", None, 10)
    assert [h.message_id for h in hits] == [exact, scattered]


async def test_japanese_and_korean_lines_match_on_shared_bigrams(store: Store) -> None:
    japanese = await add(store, "先週、京都の伏見稲荷に行ってきたよ。鳥居がすごかった。")
    korean = await add(store, "지난 주말에 제주도 한라산에 올라갔어.")
    await add(store, "今日はラーメンを食べた。")
    hits = await store.search("p", "この前どこの稲荷に行ったって言ったっけ？", None, 10)
    assert [h.message_id for h in hits][:1] == [japanese]
    hits = await store.search("p", "내가 주말에 어느 산에 갔다고 했지?", None, 10)
    assert [h.message_id for h in hits][:1] == [korean]


async def test_words_joined_by_underscores_are_found_by_each_part(store: Store) -> None:
    said = await add(store, "my wifi is called tea_house_guest")
    assert [h.message_id for h in await store.search("p", "guest", None, 10)] == [said]


async def test_each_audience_has_its_own_index_terms(
    store: Store, store_backend: StoreBackend
) -> None:
    # a search then reads only the doclists of the audiences it may see, not everyone's
    await add(store, "garden", audience="user:alice")
    await add(store, "garden", audience="user:bob")
    terms = [t for t in await index_vocabulary(store_backend) if t.endswith("garden")]
    assert len(terms) == 2 and "garden" not in terms
    assert len(await store.search("p", "garden", ["user:alice"], 10)) == 1
    assert len(await store.search("p", "garden", None, 10)) == 2
