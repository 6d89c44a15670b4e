"""Search text normalisation, done in Python so every store backend indexes the same terms.

Case and accents are folded before indexing (SQLite 3.40's trigram tokenizer cannot remove
diacritics and finds nothing under three characters). Runs of CJK characters, which have no
spaces between words, are indexed as overlapping bigrams so a two-character word like 东京 is
found inside a longer sentence. A query's CJK run matches a message sharing *any* of its
bigrams, so a question asked in other words still finds what was said; BM25 ranks messages that
share more of them higher, and the run's exact phrase is one more OR'd term that boosts exact
matches. Kana and Hangul are treated the same way.

Words of spaced scripts are stemmed (Snowball, in the partner's language, English by default),
on the indexed text and on the query alike, so "joined" and "join", "names" and "named" meet.
A word is stemmed with its accents (the stemmers expect them) and folded afterwards.

Every term carries a short tag of its audience (the store derives it), so the index keeps one
doclist per term *and audience*: a search reads only the postings of the audiences it may see,
and its cost follows the size of their history, not everyone's.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence

import snowballstemmer

_WORD = re.compile(r"[^\W_]+")
"""Letters and digits: the index's tokenizer splits on "_" too, and must see our terms whole."""
_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables
)
CJK_RUN = re.compile(f"[{_CJK}]+")
_TOKEN = re.compile(f"([{_CJK}]+)|[^\\W_{_CJK}]+")
"""A CJK run (group 1) or a word of other letters, as index_terms splits text."""
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


DEFAULT_LANGUAGE = "english"
STEM_CACHE_WORDS = 50_000
"""Stems remembered per language: chat vocabulary repeats, and stemming is pure Python."""
_LANGUAGE_NAMES = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german",
    "deutsch": "german", "el": "greek", "en": "english", "es": "spanish", "espanol": "spanish",
    "eu": "basque", "fi": "finnish", "fr": "french", "francais": "french", "ga": "irish",
    "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
    "italiano": "italian", "lt": "lithuanian", "nb": "norwegian", "ne": "nepali",
    "nl": "dutch", "nn": "norwegian", "no": "norwegian", "pl": "polish", "portugues":
    "portuguese", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian",
    "sv": "swedish", "ta": "tamil", "tr": "turkish",
    # CJK text is indexed as bigrams whatever the language; words in Latin letters among it
    # are most often English
    "zh": "english", "chinese": "english", "ja": "english", "japanese": "english",
    "ko": "english", "korean": "english",
}  # fmt: skip


def search_language(value: str) -> str:
    """The stemmer for a preset's ``language:``: a Snowball name ("spanish"), an ISO 639-1
    code ("es", "pt-BR") or the language's own name ("Deutsch"). ValueError if unknown."""
    key = fold(value).strip().replace("_", "-").split("-")[0]
    if key in snowballstemmer.algorithms() and key != "porter":
        return key
    if key in _LANGUAGE_NAMES:
        return _LANGUAGE_NAMES[key]
    known = ", ".join(a for a in snowballstemmer.algorithms() if a != "porter")
    raise ValueError(
        f"{value!r} is not a language search knows; use a code like 'en' or one of {known}"
    )


@functools.cache
def _stemmer(language: str) -> Callable[[str], str]:
    stem_word = snowballstemmer.stemmer(language).stemWord
    return functools.lru_cache(maxsize=STEM_CACHE_WORDS)(stem_word)


@functools.cache
def _index_term(language: str) -> Callable[[str], str]:
    """A word's index term (its stem, folded), remembered like its stem: indexing a large
    imported history folds the same few thousand words over and over."""
    stem = _stemmer(language)
    return functools.lru_cache(maxsize=STEM_CACHE_WORDS)(lambda word: fold(stem(word)))


def fold(text: str) -> str:
    """Lower-case and strip accents: 'Café' and 'CAFE' both become 'cafe'."""
    if text.isascii():  # nothing to decompose or strip: the same result, faster
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFKC", stripped).casefold()


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _lower(text: str) -> str:
    """Case folded, accents kept (for the stemmer)."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()


def _words(part: str, language: str) -> list[tuple[str, str]]:
    """(folded word, folded stem) for each word of a spaced-script part of the text."""
    stem = _stemmer(language)
    return [(fold(word), fold(stem(word))) for word in _WORD.findall(part)]


def index_terms(text: str, language: str = DEFAULT_LANGUAGE, tag: str = "") -> str:
    """The text as the index stores it: stemmed, folded words and CJK bigrams, each prefixed
    with ``tag`` (letters and digits only, so the tokenizer keeps it on the term)."""
    out: list[str] = []
    for part in _SPLIT.split(_lower(text)):
        if not part:
            continue
        if CJK_RUN.fullmatch(part):
            out.extend(_bigrams(part))
        else:
            out.extend(map(_index_term(language), _WORD.findall(part)))
    return " ".join(tag + term for term in out)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _cjk_terms(run: str) -> list[list[str]]:
    """Each bigram of a query's CJK run, then the whole run as a phrase: an exact match
    scores on every bigram and again on the phrase."""
    grams = _bigrams(run)
    terms = [[gram] for gram in grams]
    if len(grams) > 1:
        terms.append(grams)
    return terms


def query_phrases(
    query: str, language: str = DEFAULT_LANGUAGE, tags: Sequence[str] = ("",)
) -> list[str]:
    """The query's meaningful terms under each of ``tags`` (the audiences searched), each a
    phrase of index terms joined by single spaces (a CJK run's whole phrase has several),
    without repeats: what a match of any one of them finds."""
    phrases: list[list[str]] = []
    for part in _SPLIT.split(_lower(query)):
        if not part:
            continue
        if CJK_RUN.fullmatch(part):
            phrases.extend(_cjk_terms(part))
            continue
        for word, stem in _words(part, language):
            if len(word) < 2 and not word.isdigit():
                continue
            if word in STOPWORDS:
                continue
            phrases.append([stem])
    tagged = [" ".join(tag + t for t in phrase) for tag in tags for phrase in phrases]
    return list(dict.fromkeys(tagged))


def match_expression(
    query: str, language: str = DEFAULT_LANGUAGE, tags: Sequence[str] = ("",)
) -> str | None:
    """An FTS5 expression: the OR of :func:`query_phrases`, or None if it has none.

    Every term is quoted, so user text can never inject FTS5 syntax.
    """
    phrases = query_phrases(query, language, tags)
    return " OR ".join(_quote(phrase) for phrase in phrases) if phrases else None


def _query_keys(query: str, language: str) -> set[str]:
    """What a query matches on: stems of its meaningful words and its CJK bigrams."""
    keys: set[str] = set()
    for part in _SPLIT.split(_lower(query)):
        if CJK_RUN.fullmatch(part):
            keys.update(_bigrams(part))
        elif part:
            keys.update(stem for word, stem in _words(part, language) if word not in STOPWORDS)
    return keys


def _matched_spans(text: str, keys: set[str], language: str) -> list[tuple[int, int]]:
    """(start, end) in ``text`` of every word or CJK bigram the query matches."""
    stem = _stemmer(language)
    spans: list[tuple[int, int]] = []
    for token in _TOKEN.finditer(text):
        if token.group(1):
            for i, gram in enumerate(_bigrams(_lower(token.group(1)))):
                if gram in keys:
                    spans.append((token.start() + i, token.start() + i + len(gram)))
        elif fold(stem(_lower(token.group()))) in keys:
            spans.append(token.span())
    return spans


def _densest(spans: list[tuple[int, int]], reach: int) -> int:
    """The index of the span that starts the run of spans, within ``reach`` characters,
    holding the most of them (spans in text order)."""
    best, best_count, end = 0, 0, 0
    for i, (start, _) in enumerate(spans):
        while end < len(spans) and spans[end][1] <= start + reach:
            end += 1
        if end - i > best_count:
            best, best_count = i, end - i
    return best


def snippet(text: str, query: str, language: str = DEFAULT_LANGUAGE, width: int = 200) -> str:
    """About ``width`` characters of ``text`` around the most words the query matched, with
    "…" where it was cut; the whole text (spaces squeezed) if it is short enough. A message
    found only through its neighbours' words shows its beginning."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    spans = _matched_spans(text, _query_keys(query, language), language)
    start = 0
    if spans:
        # start a little before the densest run of matches
        first = spans[_densest(spans, width * 3 // 4)][0]
        start = max(0, min(first - width // 4, len(text) - width))
        if start and (space := text.rfind(" ", start - 20, start)) > 0:
            start = space + 1
    end = min(len(text), start + width)
    if end < len(text) and (space := text.rfind(" ", end - 20, end)) > start:
        end = space
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
