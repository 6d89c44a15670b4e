"""How much room one message of a chunked reply has (:class:`Room`: the limit, how the
platform measures a message, how a piece is written where it goes) and the unit the chunker
packs (:class:`Piece`). Shared by ``adapters/chunking.py`` and the block cutters beside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

from adapters.markdown_inline import Span, to_markdown

Measure = Callable[[str], int]
"""The size of a message as the platform counts it."""
SpansMeasure = Callable[[list[Span]], int]
"""The same for a paragraph not yet written as Markdown (cheaper than parsing it again)."""


@dataclass(frozen=True)
class Room:
    """How much one message holds, how the platform measures it, and how a piece will be
    written where it goes (inside a quote, under a list marker)."""

    limit: int
    measure: Measure
    measure_spans: SpansMeasure | None = None
    wrap: Callable[[str], str] = str

    def fits(self, markdown: str) -> bool:
        return self.measure(self.wrap(markdown)) <= self.limit

    def spans_size(self, spans: list[Span]) -> int:
        """The size of a paragraph's piece, written as Markdown where it goes."""
        if self.measure_spans is None:
            return self.measure(self.wrap(to_markdown(spans)))
        first, per_line = self.wrapping
        lines = sum(span.text.count("\n") for span in spans)
        return first + per_line * lines + self.measure_spans(spans)

    @cached_property
    def wrapping(self) -> tuple[int, int]:
        """What ``wrap`` adds to a paragraph's size: for its first line, and for each line
        after it (a list item indents them), measured on one line and on two."""
        assert self.measure_spans is not None
        one, two = Span("x", ()), Span("x\nx", ())
        first = self.measure(self.wrap("x")) - self.measure_spans([one])
        second = self.measure(self.wrap("x\nx")) - self.measure_spans([two])
        return first, second - first

    def inside(self, wrap: Callable[[str], str]) -> Room:
        outer = self.wrap
        return replace(self, wrap=lambda markdown: outer(wrap(markdown)))


@dataclass(frozen=True)
class Piece:
    """A part of the reply no chunk boundary may fall inside, and what joins it to the one
    before when both go in the same chunk."""

    separator: str
    text: str
