"""Stemming for spaced scripts: inflected words find each other, in the partner's language,
in every index, old ones included (the migration and a language change re-index)."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from bot.store import SCHEMA, NewMessage, Store, for_dialect
from bot.store.opening import open_store
from bot.store.search_terms import index_terms, match_expression, search_language
from tests.conftest import StoreBackend

CHATS = itertools.count()


async def add(store: Store, text: str, partner: str = "p") -> int:
    # a chat of its own: no neighbours' words (tests/test_search_context.py)
    message_id = await store.add_message(
        NewMessage(f"c{next(CHATS)}", "user", text, "user:a", partner_id=partner)
    )
    assert message_id is not None
    return message_id


def test_english_words_are_indexed_by_their_stem() -> None:
    assert index_terms("Joined, adopted; NAMES named") == "join adopt name name"
    assert match_expression("What group did Tim join?") == '"group" OR "tim" OR "join"'


def test_accents_are_folded_after_stemming() -> None:
    # the Spanish stemmer needs the accents it was written for; the index holds none
    assert index_terms("canción canciones", "spanish") == "cancion cancion"


async def test_an_inflected_question_finds_what_was_said(store: Store) -> None:
    joined = await add(store, "I joined a fantasy literature forum last week")
    await add(store, "The weather was lovely last week")
    hits = await store.search("p", "What group did Tim join?", None, 10)
    assert [h.message_id for h in hits] == [joined]


async def test_a_partner_in_spanish_is_stemmed_in_spanish(store: Store) -> None:
    await store.set_search_language("p", "spanish")
    adopted = await add(store, "Adoptamos dos perros del refugio")
    hits = await store.search("p", "¿adoptar un perro?", None, 10)
    assert [h.message_id for h in hits] == [adopted]


async def test_changing_the_language_reindexes_the_partners_history(store: Store) -> None:
    said = await add(store, "Adoptamos dos perros")
    await add(store, "Adoptamos dos perros", partner="q")
    assert await store.search("p", "adoptar", None, 10) == []  # English: "adoptamo"
    assert await store.set_search_language("p", "spanish") == 1
    assert [h.message_id for h in await store.search("p", "adoptar", None, 10)] == [said]
    assert await store.search("q", "adoptar", None, 10) == []  # another partner is untouched
    assert await store.set_search_language("p", "spanish") == 0  # nothing to redo


async def test_the_language_is_kept_across_restarts(store_backend: StoreBackend) -> None:
    store = await store_backend.open()
    await store.set_search_language("p", "spanish")
    await store.close()
    store = await store_backend.open()
    try:
        said = await add(store, "Adoptamos dos perros")
        assert [h.message_id for h in await store.search("p", "adoptar", None, 10)] == [said]
    finally:
        await store.close()


def test_language_names_and_codes_are_understood() -> None:
    assert search_language("en") == "english"
    assert search_language("pt-BR") == "portuguese"
    assert search_language("Deutsch") == "german"
    assert search_language("zh") == "english"  # CJK is bigrams; its Latin words are English
    with pytest.raises(ValueError, match="'klingon' is not a language search knows"):
        search_language("klingon")


async def test_an_index_written_before_stemming_is_rebuilt_at_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for number, step in enumerate(SCHEMA[:3], start=1):
        script = for_dialect(step, "sqlite")
        assert isinstance(script, str)
        db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
    # a message as schema 3 indexed it: folded words, no stems
    db.execute(
        "INSERT INTO messages (chat_key, partner_id, role, text, audience, status, created_at,"
        " terms, scope) VALUES ('c', 'p', 'user', 'I adopted two dogs', 'user:a', 'done', 1.0,"
        " 'i adopted two dogs', 'scope-token')"
    )
    db.close()
    store = await open_store(path)
    try:
        assert [h.text for h in await store.search("p", "adopt a dog", None, 10)] == [
            "I adopted two dogs"
        ]
    finally:
        await store.close()
