"""Search text normalisation, done in Python so every store backend indexes the same terms.

Case and accents are folded before indexing (SQLite 3.40's trigram tokenizer cannot remove
diacritics and finds nothing under three characters). Runs of CJK characters, which have no
spaces between words, are indexed as overlapping bigrams so a two-character word like 东京 is
found inside a longer sentence. A query's CJK run matches a message sharing *any* of its
bigrams, so a question asked in other words still finds what was said; BM25 ranks messages that
share more of them higher, and the run's exact phrase is one more OR'd term that boosts exact
matches. Kana and Hangul are treated the same way.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_SPLIT = re.compile(f"([{_CJK}]+)")

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "did",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def fold(text: str) -> str:
    """Lower-case and strip accents: 'Café' and 'CAFE' both become 'cafe'."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFKC", stripped).casefold()


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_terms(text: str) -> str:
    """The text as the index stores it: folded words and CJK bigrams, space separated."""
    out: list[str] = []
    for part in _SPLIT.split(fold(text)):
        if not part:
            continue
        if _CJK_RUN.fullmatch(part):
            out.extend(_bigrams(part))
        else:
            out.extend(_WORD.findall(part))
    return " ".join(out)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _cjk_terms(run: str) -> list[str]:
    """Each bigram of a query's CJK run, then the whole run as a phrase: an exact match
    scores on every bigram and again on the phrase."""
    grams = _bigrams(run)
    terms = [_quote(gram) for gram in grams]
    if len(grams) > 1:
        terms.append(_quote(" ".join(grams)))
    return terms


def match_expression(query: str) -> str | None:
    """An FTS5 expression: the OR of the query's meaningful terms, or None if it has none.

    Every term is quoted, so user text can never inject FTS5 syntax.
    """
    terms: list[str] = []
    for part in _SPLIT.split(fold(query)):
        if not part:
            continue
        if _CJK_RUN.fullmatch(part):
            terms.extend(_cjk_terms(part))
            continue
        for word in _WORD.findall(part):
            if len(word) < 2 and not word.isdigit():
                continue
            if word in STOPWORDS:
                continue
            terms.append(_quote(word))
    unique = list(dict.fromkeys(terms))
    return " OR ".join(unique) if unique else None
