"""Memory text compared the way people mean it: case and spacing ignored. How duplicates are
found and how forgetting recognises copies of a forgotten text."""

from __future__ import annotations


def comparable(text: str) -> str:
    return " ".join(text.casefold().split())


def quotes(text: str, needles: list[str]) -> bool:
    """Whether ``text`` contains any of the needles (already :func:`comparable`), ignoring
    case and spacing: how forgetting finds copies of a forgotten text."""
    folded = comparable(text)
    return any(needle in folded for needle in needles if needle)
