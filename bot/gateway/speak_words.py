"""The words the speak gate reads (``bot/gateway/speak_score.py``): questions, bare
acknowledgements, plans among the people, requests, names, interests, and the words two
messages share. English and Chinese; plain lists, no model."""

from __future__ import annotations

import re

QUESTION_WORDS = frozenset(
    ("what", "why", "how", "is", "are", "can", "could", "should", "do", "does", "did", "which",
     "who", "whom", "whose", "when", "where", "will", "would", "any", "anyone", "anybody", "has",
     "have", "shall")
)  # fmt: skip
CJK_QUESTION = re.compile(
    r"(吗|呢|么)[\s。！!~～]*$|什么|怎么|为什么|哪|几点|多少|是不是|有没有|要不要|能不能|会不会"
)
ACK_PHRASES = tuple(
    sorted(
        ("ok", "okay", "k", "kk", "thanks", "thank you", "thx", "ty", "cool", "nice", "great",
         "perfect", "awesome", "good", "good idea", "got it", "sure", "will do", "lol", "lmao",
         "haha", "hahaha", "hehe", "wow", "yes", "yeah", "yep", "yup", "i see", "noted",
         "makes sense", "good to know", "i had no idea", "no idea", "oh", "ah", "alright",
         "amazing", "interesting", "love it", "true", "right", "agreed", "fair enough", "fine",
         "indeed", "gotcha", "understood"),
        key=len,
        reverse=True,
    )
)  # fmt: skip
"""What a bare acknowledgement is made of (whole phrases, longest first)."""
CJK_ACK = (
    "原来如此", "明白了", "知道了", "学到了", "太棒了", "没问题", "好的", "好嘞", "谢谢", "多谢",
    "收到", "明白", "懂了", "哈哈", "厉害", "嗯嗯", "了解", "可以", "好", "嗯", "哈", "棒", "行",
)  # fmt: skip
PLANS = re.compile(
    r"\b(who'?s|who is) (coming|in|free|around|driving)\b|\bwhat time\b|\bare we\b|\bwe still\b"
    r"|\bthe meeting\b|\b(can|could) (someone|somebody|anyone)\b|\bdid (anyone|anybody) see\b"
    r"|\b(has|have) (anyone|anybody) seen\b|\bwho (has|took|wants)\b|\banyone (coming|free|up for"
    r"|want)\b|\bbrb\b|\bbe right back\b|\bgotta\b|\bon (my|the) way\b|\bheading (out|home)\b"
    r"|\bmoved to\b|几点|集合|谁把|谁拿|谁有|谁今|有空|有人去|有人来|一起去|明天|马上回来|我去"
    r"|我先|下楼",
    re.IGNORECASE,
)
"""Plans only the group's people can answer (who comes, when, who has what), or someone
stepping away ("brb making tea"): an interest word in them is said in passing."""
REQUEST = re.compile(
    r"\b(give|tell|show|teach|explain) (us|me)\b|\bgo on\b|\bgo ahead\b|\banother one\b"
    r"|再来|说说|讲讲|给我|来一个|教教",
    re.IGNORECASE,
)
"""Asking for something without a question mark ("yes, give us a hard one")."""
STOP_WORDS = frozenset(
    ("this", "that", "with", "what", "have", "your", "just", "like", "about", "there", "their",
     "they", "them", "then", "than", "from", "will", "would", "should", "could", "when", "where",
     "which", "really", "some", "more", "very", "into", "only", "also", "even", "much", "many",
     "been", "were", "does", "well", "here", "make", "good", "know", "think", "want", "best",
     "first")
)  # fmt: skip
OPENERS = frozenset(
    ("ok", "okay", "so", "well", "yes", "yeah", "yep", "no", "nope", "hey", "hi", "hello", "oh",
     "wow", "guys", "folks", "anyway", "anyways", "honestly", "also", "btw", "lol", "haha",
     "hmm", "ugh", "sure", "thanks", "nice", "cool", "right", "wait", "man", "dude", "alright",
     "actually", "seriously", "random", "look", "listen", "sorry", "please", "morning", "damn",
     "great", "fine", "true", "agreed", "besides", "however", "then", "now", "first",
     "finally", "basically", "like", "um", "uh", "ah", "aw", "yay", "omg", "friends", "people",
     "still", "again", "sadly", "luckily", "today", "tonight", "tomorrow", "yesterday")
)  # fmt: skip
"""Words that open a sentence with a comma and name nobody ("Honestly, …")."""
WORD = re.compile(r"[^\W\d_]+")
URL = re.compile(r"https?://\S+", re.IGNORECASE)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]+")


def mentions(text: str, word: str) -> bool:
    """``word`` in ``text``: a whole word in spaced scripts (an English word with its plural
    and -ing/-ed forms too: "star" finds "stars", "bake" "baking"), anywhere in CJK."""
    folded, wanted = text.casefold(), word.casefold()
    if not wanted.isascii() and not any(c == " " for c in wanted):
        return wanted in folded
    forms = "|".join(re.escape(form) for form in inflections(wanted))
    return re.search(rf"(?<!\w)(?:{forms})(?!\w)", folded) is not None


def inflections(word: str) -> set[str]:
    if not word.isascii() or not word.isalpha() or len(word) < 3:
        return {word}
    stem = word[:-1] if word.endswith("e") else word
    forms = {word, word + "s", word + "es", stem + "ing", stem + "ed"}
    if word.endswith("s"):
        forms.add(word[:-1])
    return forms


def is_question(text: str) -> bool:
    text = URL.sub("", text)  # "?" in a link asks nothing
    if "?" in text or "？" in text or CJK_QUESTION.search(text):
        return True
    words = WORD.findall(text.casefold())
    if len(words) >= 2 and words[0] in ("what", "how") and words[1] in ("a", "an", "nice"):
        return False  # "what a week"
    return bool(words) and words[0] in QUESTION_WORDS


def is_bare(text: str) -> bool:
    """Nothing but thanks, okays and laughter: nothing to answer."""
    if CJK.search(text):
        rest = re.sub(r"[\W\d_a-zA-Z]+", "", text)
        for phrase in CJK_ACK:
            rest = rest.replace(phrase, "")
        return not rest
    rest = " ".join(WORD.findall(text.casefold()))
    for phrase in ACK_PHRASES:
        rest = re.sub(rf"(?<!\w){re.escape(phrase)}(?!\w)", "", rest)
    return not rest.strip()


def keywords(text: str) -> set[str]:
    """Words to tell whether two messages share a subject: the stems of longer words, and
    pairs of CJK characters."""
    found = {w[:5] for w in WORD.findall(text.casefold()) if len(w) >= 4 and w not in STOP_WORDS}
    for run in CJK.findall(text):
        found |= {run[i : i + 2] for i in range(len(run) - 1)}
    return found


def names_first_or_last(text: str, name: str) -> bool:
    """``name`` opens ``text`` ("Bob, …", "阿杰，…") or closes it after a comma ("…, Alice?")."""
    wanted = re.escape(name.casefold())
    folded = text.casefold().strip()
    first = rf"^@?{wanted}(?![^\W\d_])" if name.isascii() else rf"^@?{wanted}"
    last = rf"[,，]\s*{wanted}\W*$"
    return re.search(first, folded) is not None or re.search(last, folded) is not None


def names_someone(text: str, people: set[str]) -> bool:
    """``text`` speaks to someone by name: an ``@handle``, one of ``people`` first or last, or
    a capitalised name and a comma first ("Tom, …": no partner of the group, or it would have
    been addressed)."""
    if re.search(r"(?<![\w@])@\w", text):
        return True
    if any(names_first_or_last(text, name) for name in people if name):
        return True
    opening = re.match(r"\s*([A-Z][a-z]+)\s*[,，]", text)
    return opening is not None and opening.group(1).casefold() not in OPENERS
