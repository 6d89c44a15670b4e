"""Scenes: how well the speak gate tells when a partner should speak to group talk nobody
addressed to it, how often it would ask the model, and what a scene costs in tokens.

1. **The gate** against ``bench/data/scene_gate.jsonl``: group messages nobody addressed, each
   with the talk before it and, for each partner of a three-partner cast (lively Mira, addressed
   Sol, quiet Kai; the file's first line), whether that partner should speak. The labels were
   written and committed before the gate was tuned (the labelling guide is in that first line).
   Cases of split ``tune`` were used to tune the scoring; cases of split ``check`` never were.
   Each case runs through the gate's own reading and scoring (``bot/gateway/speak_score.py``)
   after a background of earlier talk (each of the group's people said something two to three
   hours before, as the 20 messages the gate reads of a real group would show). Per presence:
   precision and recall of "speaks", with an ambiguous case decided as the gate decides it
   when it cannot ask (it stays quiet), and, beside it, as a model that always agreed with the
   label would (the most the question could add). Goals: precision >= 0.8 and recall >= 0.6
   per presence; ambiguous cases (a model call) <= 10 % of the messages.
2. **Tokens per human message**, a 3-partner scene against a 1-partner group: the same scripted
   group conversation (``SCRIPT``) through the whole gateway (``build_app``, its prompt
   building, the speak gate, scene turns and hand-overs) against the fake OpenAI-compatible
   server, which counts a request's prompt tokens as its JSON bytes / 4 and a reply's as its
   characters / 4 (as ``bench/review.py``: a like-for-like ratio, not a provider's bill). The
   tokens are the ones the gateway books in its usage table (``/admin usage``), by kind.

    .venv/bin/python bench/scenes.py              # both
    .venv/bin/python bench/scenes.py --only gate --misses
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.channels import CountingChannel  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from bot.events import ChatRef, Inbound, Sender  # noqa: E402
from bot.gateway.speak_gate import ANSWER_TOKENS, question  # noqa: E402
from bot.gateway.speak_score import Call, Verdict, presence, read, weigh  # noqa: E402
from bot.store import MessageRow  # noqa: E402
from partners.catalog import PartnerCatalog  # noqa: E402
from partners.lore import estimate_tokens  # noqa: E402
from partners.persona import Partner  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "scene_gate.jsonl"
NOW = 1_800_000_000.0
PEOPLE = ("Alice", "Bob", "Dana", "Chen", "小林", "阿杰", "陈")
BACKGROUND_SECONDS = 7200
PRECISION_GOAL, RECALL_GOAL, ASK_GOAL = 0.8, 0.6, 0.10

SCRIPT = (
    ("Alice", "Mira, what tea should I try this week?"),
    ("Alice", "is that one strong?"),
    ("Bob", "Sol, is Jupiter up tonight?"),
    ("Bob", "can I see its moons with binoculars?"),
    ("Dana", "lol"),
    ("Dana", "does anyone have a simple cake recipe?"),
    ("Alice", "everyone, what are you doing this weekend?"),
    ("Bob", "Kai, what's a good chess opening for a beginner?"),
    ("Bob", "why that one?"),
    ("Dana", "Bob, are you coming tonight?"),
    ("Bob", "yes, around 8"),
    ("Alice", "Mira and Sol, tea or coffee?"),
    ("Dana", "I baked my first sourdough bread today!"),
    ("Alice", "what a week"),
    ("Bob", "does anyone know when the next meteor shower is?"),
    ("Alice", "thanks!"),
    ("Dana", "my sister is getting married in June"),
    ("Alice", "Sol, any tips for a first hike?"),
    ("Alice", "what about shoes?"),
    ("Bob", "brb, getting food"),
)
"""A group's talk: people naming partners, everyone, nobody; follow-ups, small talk."""
ROUNDS = 3
REPLY = "That is a lovely thought, and I have a few ideas about it. Let me say what I think."
HANDOVER_EVERY = 3
"""Every third reply of a partner names the next partner of the cast (a hand-over)."""


def load(path: Path = DATA) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:] if line.strip()]


def make_cast(root: Path, members: Sequence[dict[str, Any]]) -> list[Partner]:
    """The cast as partners on disk, with their presence and interests in preset.yml."""
    catalog = PartnerCatalog(root)
    for member in members:
        partner = catalog.create(member["id"], member["name"])
        with (partner.dir / "preset.yml").open("a", encoding="utf-8") as preset:
            preset.write(f"\npresence: {member['presence']}\n")
            preset.write(f"interests: {json.dumps(member['interests'], ensure_ascii=False)}\n")
    catalog.reload()
    return [catalog.require(member["id"]) for member in members]


def rows_of(context: Sequence[dict[str, Any]]) -> list[MessageRow]:
    """The group's talk before a case as the store keeps it: a background of earlier talk,
    then the case's context (a person's message addressed to a partner is a ``user`` row for
    that partner; one nobody addressed is ``context``; a partner's is ``assistant``)."""
    rows = []
    for i, person in enumerate(PEOPLE):
        ago = BACKGROUND_SECONDS + 60 * (len(PEOPLE) - i)
        rows.append(row(i, None, person, "context", f"earlier message {i}", ago))
    for i, said in enumerate(context, start=len(rows)):
        if "partner" in said:
            rows.append(
                row(i, said["partner"], said["partner"], "assistant", said["text"], said["ago"])
            )
        else:
            role = "user" if said["to"] else "context"
            rows.append(row(i, said["to"], said["speaker"], role, said["text"], said["ago"]))
    return rows


def row(
    i: int, partner_id: str | None, speaker: str, role: str, text: str, ago: float
) -> MessageRow:
    person = role != "assistant"
    return MessageRow(
        i, None, partner_id, "bench:group", f"m{i}" if person else None,
        f"bench:{speaker}" if person else None, speaker, role, text, "group", "done", NOW - ago,
    )  # fmt: skip


def verdict(cast: Sequence[Partner], case: dict[str, Any]) -> Verdict:
    reading = read(
        case["text"], case["sender"], case["reply_to_person"], rows_of(case["context"]), NOW
    )
    return weigh(cast, reading)


@dataclass
class Tally:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    misses: list[str] = field(default_factory=list)

    def add(self, want: bool, got: bool, case_id: str) -> None:
        self.tp += want and got
        self.fp += got and not want
        self.fn += want and not got
        if want != got:
            self.misses.append(f"{case_id} ({'missed' if want else 'spoke'})")

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def gate_figures(split: str | None, misses: bool) -> bool:
    """Print the gate's figures on one split (None: all cases); whether the goals hold."""
    header, cases = load()
    cases = [c for c in cases if split is None or c["split"] == split]
    with tempfile.TemporaryDirectory() as tmp:
        cast = make_cast(Path(tmp), header["cast"])
        plain = {p.id: Tally() for p in cast}
        asked = {p.id: Tally() for p in cast}
        asks = 0
        for case in cases:
            found = verdict(cast, case)
            asks += found.call is Call.ASK
            for partner in cast:
                want = case["speak"][partner.id]
                joins = found.partner_id == partner.id and found.call is Call.JOIN
                plain[partner.id].add(want, joins, case["id"])
                agreed = found.partner_id == partner.id and found.call is Call.ASK and want
                asked[partner.id].add(want, joins or agreed, case["id"])
    share = asks / len(cases) if cases else 0.0
    name = split or "all"
    print(f"\nspeak gate, {name} ({len(cases)} messages): ", end="")
    print(f"model asked on {asks} = {share:.1%} (goal <= 10 %)")
    print(f"{'partner':<16}{'speaks':>8}{'precision':>11}{'recall':>8}   with the model agreeing")
    held = share <= ASK_GOAL
    for partner in cast:
        tally, best = plain[partner.id], asked[partner.id]
        wanted = tally.tp + tally.fn
        label = f"{partner.id} ({presence(partner)})"
        print(
            f"{label:<16}{wanted:>8}{tally.precision:>11.2f}{tally.recall:>8.2f}"
            f"   {best.precision:.2f} / {best.recall:.2f}"
        )
        held = held and tally.precision >= PRECISION_GOAL and tally.recall >= RECALL_GOAL
        if misses and tally.misses:
            print("    " + ", ".join(tally.misses))
    return held


def responder(names: Sequence[str]) -> Any:
    """The fake model: "no" to the speak gate's question, else a reply of the same length
    each time, every third one naming the next partner."""
    counter = itertools.count(1)

    def answer(request: dict[str, Any]) -> Reply:
        if "max_tokens" in request:
            return Reply(text="no")
        system = str(request["messages"][0]["content"])
        speaker = next((n for n in names if f"You are {n}." in system), names[0])
        following = names[(names.index(speaker) + 1) % len(names)]
        if next(counter) % HANDOVER_EVERY == 0:
            return Reply(text=f"{REPLY} What do you think, {following}?")
        return Reply(text=REPLY)

    return answer


async def group_tokens(members: Sequence[dict[str, Any]], bound: Sequence[str]) -> dict[str, Any]:
    """Run ``SCRIPT`` (``ROUNDS`` times) in a group with ``bound`` partners of ``members``;
    the usage the gateway booked, by kind."""
    names = [m["name"] for m in members]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        make_cast(data / "partners", members)
        async with FakeLLM(responder(names)) as llm:
            config = Config.model_validate(
                {
                    "llm": {
                        "base_url": llm.base_url,
                        "api_key": "x",
                        "model": "m",
                        "max_retries": 0,
                    },
                    "storage": {"data_dir": str(data)},
                    "owner": {"timezone": "UTC"},
                    "memory": {"auto_memory": False},
                    "scene": {"max_unaddressed_per_hour": 60, "gate_calls_per_hour": 120},
                }
            )
            app = await build_app(config, {"bench": CountingChannel()})
            await app.start()
            for partner_id in bound:
                await app.store.bind("bench", "group", partner_id, "config")
            ids = itertools.count(1)
            for _ in range(ROUNDS):
                for sender, text in SCRIPT:
                    await app.gateway.receive(
                        Inbound(
                            ChatRef("bench", "group", "group"),
                            Sender("bench", sender.casefold(), sender),
                            f"m{next(ids)}",
                            text,
                            datetime.now(UTC),
                        )
                    )
                    await app.dispatcher.idle()
            usage = await app.store.usage("2000-01-01")
            await app.stop()
    kinds: dict[str, dict[str, int]] = {}
    for row in usage:
        kind = kinds.setdefault(row["kind"], {"calls": 0, "prompt": 0, "completion": 0})
        kind["calls"] += row["calls"]
        kind["prompt"] += row["prompt_tokens"]
        kind["completion"] += row["completion_tokens"]
    return kinds


async def token_figures() -> None:
    header, _ = load()
    members = header["cast"]
    messages = len(SCRIPT) * ROUNDS
    print(f"\ntokens per human message ({messages} messages: SCRIPT x {ROUNDS})")
    results = {}
    for label, bound in (
        ("3-partner scene", [m["id"] for m in members]),
        ("1-partner group", [members[0]["id"]]),
    ):
        kinds = await group_tokens(members, bound)
        total = sum(k["prompt"] + k["completion"] for k in kinds.values())
        results[label] = total / messages
        parts = ", ".join(
            f"{kind} {k['calls']} calls, {k['prompt'] / max(k['calls'], 1):.0f} prompt tokens each"
            for kind, k in sorted(kinds.items())
        )
        print(f"{label:<16} {total / messages:>7.0f}   ({parts})")
    scene, single = results["3-partner scene"], results["1-partner group"]
    print(f"scene / single: {scene / single:.2f}x" if single else "no tokens in the single group")
    question_size(members)


def question_size(members: Sequence[dict[str, Any]]) -> None:
    """The gate's one question, as it would be sent for each ambiguous case of the labelled set
    (estimated as the lorebook budget counts tokens: partners/lore.py)."""
    _, cases = load()
    sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        cast = make_cast(Path(tmp), members)
        for case in cases:
            found = verdict(cast, case)
            partner = next((p for p in cast if p.id == found.partner_id), None)
            if found.call is not Call.ASK or partner is None:
                continue
            inbound = Inbound(
                ChatRef("bench", "group", "group"),
                Sender("bench", case["sender"], case["sender"]),
                "m",
                case["text"],
                datetime.now(UTC),
            )
            asked = question(partner, rows_of(case["context"]), inbound)
            sizes.append(sum(estimate_tokens(m["content"]) for m in asked))
    if sizes:
        print(
            f"the gate's question ({len(sizes)} ambiguous cases): {min(sizes)}-{max(sizes)} "
            f"tokens in (mean {sum(sizes) / len(sizes):.0f}), at most {ANSWER_TOKENS} out"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("gate", "tokens"))
    parser.add_argument("--misses", action="store_true", help="list the cases the gate got wrong")
    args = parser.parse_args()
    if args.only in (None, "gate"):
        for split in ("tune", "check", None):
            gate_figures(split, args.misses)
    if args.only in (None, "tokens"):
        asyncio.run(token_figures())


if __name__ == "__main__":
    main()
