"""What a search query and a stored message are prefixed with before they are embedded.

Many retrieval models were trained with a marker telling a search from a text to be found
("query: " / "passage: " for e5, "search_query: " / "search_document: " for nomic-embed), and
give worse vectors without it; an OpenAI-compatible endpoint cannot tell the two apart by
itself. ``[embeddings] query_prefix`` / ``passage_prefix`` say it; unset, the preset of the
model's family (chosen by the model's name) applies, and a model known to none gets none.
"""

from __future__ import annotations

from collections.abc import Sequence

_BGE_QUERY = "Represent this sentence for searching relevant passages: "
_E5_INSTRUCT = "Instruct: Given a question, retrieve past messages that answer it\nQuery: "

PRESETS: Sequence[tuple[tuple[str, ...], str, str]] = (
    # (every fragment the lower-cased model name must hold, query prefix, passage prefix);
    # the first row that fits wins, so the narrower names come first
    (("e5", "instruct"), _E5_INSTRUCT, ""),
    (("e5", "mistral"), _E5_INSTRUCT, ""),
    (("e5",), "query: ", "passage: "),
    (("bge-m3",), "", ""),
    (("bge", "zh"), "为这个句子生成表示以用于检索相关文章：", ""),
    (("bge",), _BGE_QUERY, ""),
    (("nomic-embed",), "search_query: ", "search_document: "),
    (("mxbai-embed",), _BGE_QUERY, ""),
    (("arctic-embed", "v2"), "query: ", ""),
    (("arctic-embed",), _BGE_QUERY, ""),
)
"""Known families, as their model cards give them. bge-m3 and OpenAI's, gte and most other
models take no prefix."""


def preset_prefixes(model: str) -> tuple[str, str]:
    """(query prefix, passage prefix) of the family ``model`` belongs to; ("", "") if none."""
    name = model.lower()
    for fragments, query, passage in PRESETS:
        if all(fragment in name for fragment in fragments):
            return query, passage
    return "", ""
